import FoundationEssentials
import KeychainClient
import KeychainCore
import KeychainEngine
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Which keychain service this process's SecItem calls (and the `security` command) use.
///
/// The daemon whenever its socket exists: `KEYCHAIN_SOCKET` if set (set but empty means no daemon),
/// else the system daemon's `/run/keychain/securityd.sock`, else the user's
/// `$XDG_RUNTIME_DIR/keychain/securityd.sock`. The system socket comes first: a path that the user's own
/// processes can create must not outrank it, or any of them could stand in for the system daemon and
/// collect the passcode that proves the user to it. Otherwise the embedded engine, on the keychain the environment
/// names (`EmbeddedKeychain`), for the caller the environment describes. A daemon chosen and then gone
/// is `errSecNotAvailable`, never a silent switch to the files. `use(_:)` puts another service in
/// place of both (tests put a fake there).
public enum KeychainServices {
    private static let chosen = Mutex<(any KeychainService)?>(nil)
    private static let daemons = Mutex<[String: DaemonKeychainService]>([:])
    /// The last answer of `daemonSocket()` and when it was found: whether a default socket exists is
    /// asked of the file system at most once a second, not on every call.
    private static let lastLookup = Mutex<(variable: String?, runtime: String?, at: UInt64, socket: String?)?>(nil)

    /// The service for this call: the one set with `use(_:)`, else the daemon, else the embedded keychain.
    public static func current() throws -> any KeychainService {
        if let service = chosen.withLock({ $0 }) { return service }
        if let socket = daemonSocket() { return daemon(at: socket) }
        return InProcessKeychainService(keychain: try EmbeddedKeychain.current(), client: EmbeddedKeychain.client())
    }

    /// Routes this process's keychain calls to `service`; nil returns them to the daemon or the
    /// embedded keychain.
    public static func use(_ service: (any KeychainService)?) {
        chosen.withLock { $0 = service }
    }

    /// The daemon socket this process uses now, or nil for the embedded keychain.
    public static func daemonSocket() -> String? {
        let variable = getenv("KEYCHAIN_SOCKET").map { String(cString: $0) }
        if let variable { return variable.isEmpty ? nil : variable }
        let runtime = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) }
        let now = monotonicNow
        let last = lastLookup.withLock { $0 }.flatMap { $0.variable == variable && $0.runtime == runtime ? $0 : nil }
        // The system daemon, once found, is kept for good. (Another thread may have stored a lookup made
        // after `now` was read.)
        if let last, last.socket == KeychainLocations.systemSocket || now < last.at || now - last.at < 1_000_000_000 {
            return last.socket
        }
        // A daemon found is never given up for the files: gone, it answers errSecNotAvailable through its
        // connection rather than this process going on with a keychain of its own. The user's daemon
        // gives way only to the system daemon, which outranks it; until one is found, a daemon started
        // later is looked for once a second.
        let found = [KeychainLocations.systemSocket, KeychainLocations.userSocket].compactMap { $0 }.first(
            where: isSocket)
        let socket = found ?? last?.socket
        lastLookup.withLock { $0 = (variable, runtime, now, socket) }
        return socket
    }

    /// The socket of the daemon this process's keychain calls go to now, nil when they go elsewhere (the
    /// embedded keychain, or a service chosen with `use(_:)` that is not a daemon): for the `security`
    /// command's messages, which say what they talk to.
    package static func daemonSocketInUse() -> String? {
        if let service = chosen.withLock({ $0 }) { return (service as? DaemonKeychainService)?.socketPath }
        return daemonSocket()
    }

    /// Whether this process's keychain calls go to a daemon running as its own user (not root): one
    /// that can identify the process only while it is dumpable (see `DaemonConnection`). The `security`
    /// command asks before it makes itself non-dumpable.
    public static func servedByDaemonOfThisUser() -> Bool {
        guard chosen.withLock({ $0 }) == nil, let socket = daemonSocket() else { return false }
        return DaemonOwner.runsAsThisUser(socketAt: socket)
    }

    /// Closes what this process keeps open on its keychains: the embedded databases (so that the last
    /// process folds the log into the database) and idle daemon connections. A process about to exit
    /// calls this; the keychains stay usable.
    public static func closeConnections() {
        EmbeddedKeychain.closeDatabases()
        for daemon in daemons.withLock({ Array($0.values) }) { daemon.closeIdleConnections() }
    }

    private static func daemon(at socket: String) -> DaemonKeychainService {
        daemons.withLock { daemons in
            if let known = daemons[socket] { return known }
            let service = DaemonKeychainService(socketPath: socket)
            daemons[socket] = service
            return service
        }
    }

    private static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK
    }

    private static var monotonicNow: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
