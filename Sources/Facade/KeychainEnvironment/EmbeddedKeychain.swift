import FoundationEssentials
import KeychainAuthenticators
import KeychainCore
import KeychainEngine
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The keychain this process uses when no daemon serves it: the directory `KEYCHAIN_HOME` names,
/// else `$XDG_DATA_HOME/keychain`, else `~/.local/share/keychain`.
///
/// The environment is read on every call (a `getenv`, not a copy of the environment), so a test
/// that points `KEYCHAIN_HOME` or `KEYCHAIN_ACCESS_GROUPS` elsewhere takes effect at once; each
/// directory is opened once per process.
public enum EmbeddedKeychain {
    private static let opened = Mutex<[String: Keychain]>([:])

    /// The keychain directory for the current environment.
    public static var directory: String { KeychainLocations.userDirectory }

    /// The variables that choose the directory, as they were when `last` was found.
    private struct Choice: Sendable {
        var keychainHome: String?
        var dataHome: String?
        var home: String?

        static let names = ["KEYCHAIN_HOME", "XDG_DATA_HOME", "HOME"]

        init() {
            keychainHome = getenv(Self.names[0]).map { String(cString: $0) }
            dataHome = getenv(Self.names[1]).map { String(cString: $0) }
            home = getenv(Self.names[2]).map { String(cString: $0) }
        }

        /// Whether the environment still says the same, compared without building any string.
        var isCurrent: Bool {
            Self.same(keychainHome, getenv(Self.names[0])) && Self.same(dataHome, getenv(Self.names[1]))
                && Self.same(home, getenv(Self.names[2]))
        }

        private static func same(_ kept: String?, _ now: UnsafeMutablePointer<CChar>?) -> Bool {
            switch (kept, now) {
            case (nil, nil): true
            case (let kept?, let now?): strcmp(kept, now) == 0
            default: false
            }
        }
    }

    /// The last keychain handed out and the environment it was found for: the common case, asked on
    /// every SecItem call, costs three lookups and comparisons instead of building the path.
    private static let last = Mutex<(choice: Choice, keychain: Keychain)?>(nil)

    /// The open keychain for the current environment, opening it on first use.
    public static func current() throws -> Keychain {
        if let cached = last.withLock({ $0 }), cached.choice.isCurrent, !cached.keychain.isRetired {
            return cached.keychain
        }
        // Paths are handled as text: a variable that is not UTF-8 would be repaired into another path,
        // and two different byte strings would name one keychain.
        for name in ["KEYCHAIN_HOME", "XDG_DATA_HOME", "HOME", "KEYCHAIN_DEVICE_ROOT"] {
            if let value = getenv(name), String(validatingCString: value) == nil {
                throw KeychainError.notAvailable("\(name) is not valid UTF-8")
            }
        }
        let choice = Choice()
        let keychain = try open(directory)
        last.withLock { $0 = (choice, keychain) }
        return keychain
    }

    /// One `Keychain` per directory per process, whatever spelling of its path the environment uses
    /// (`dir`, `dir/`, a link to it): two would each hold their own lock state and keybag view of one
    /// keychain. Opened under the lock, so threads racing on first use wait for the one that opens it.
    private static func open(_ path: String) throws -> Keychain {
        try opened.withLock { cache in
            // An erased keychain is opened again: its directory holds a new one.
            cache = cache.filter { !$0.value.isRetired }
            if let keychain = cache[path] { return keychain }
            if let canonical = canonicalPath(path), let keychain = cache[canonical] {
                cache[path] = keychain
                return keychain
            }
            var fprintd: (bus: String, username: String)?
            if variable("KEYCHAIN_BIOMETRY") == "fprintd", let user = KeychainLocations.userName(of: getuid()) {
                fprintd = (variable("DBUS_SYSTEM_BUS_ADDRESS") ?? "unix:path=/var/run/dbus/system_bus_socket", user)
            }
            var options = KeychainOptions.standard(
                deviceRootPath: variable("KEYCHAIN_DEVICE_ROOT"), pinentryProgram: pinentryProgram(), fprintd: fprintd,
                simulatedCompanion: variable("KEYCHAIN_COMPANION") == "simulated", idleConnections: 4)
            // Where `security unlock-keychain --session` holds an unlock for the login session.
            options.sessionDirectory = variable("XDG_RUNTIME_DIR")
            let keychain = try Keychain(directory: path, options: options)
            cache[path] = keychain
            if let canonical = canonicalPath(path) { cache[canonical] = keychain }
            return keychain
        }
    }

    /// The program that asks for the device passcode: `KEYCHAIN_PINENTRY` (empty: none), else
    /// `/usr/bin/pinentry` when a person could answer it (a terminal on standard input, or a display).
    private static func pinentryProgram() -> String? {
        if let chosen = variable("KEYCHAIN_PINENTRY") { return chosen.hasPrefix("/") ? chosen : nil }
        let standard = "/usr/bin/pinentry"
        guard access(standard, X_OK) == 0 else { return nil }
        let display = variable("DISPLAY") != nil || variable("WAYLAND_DISPLAY") != nil
        return isatty(0) == 1 || display ? standard : nil
    }

    private static func canonicalPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Closes the database connections of every embedded keychain this process opened. A process that
    /// is about to exit calls this so that, if it was the last one using a keychain, SQLite folds the
    /// write-ahead log into the database: the next process then opens it without replaying the log.
    /// The keychains stay usable; a later call reopens a connection.
    public static func closeDatabases() {
        let keychains = opened.withLock { cache in
            cache.values.reduce(into: [ObjectIdentifier: Keychain]()) { $0[ObjectIdentifier($1)] = $1 }
        }
        for keychain in keychains.values { keychain.closeIdleConnections() }
    }

    private static let lastClient = Mutex<(raw: String?, identity: ClientIdentity)?>(nil)

    /// The emulated entitlements of this process (see `ClientIdentity.fromEnvironment`), parsed again
    /// only when `KEYCHAIN_ACCESS_GROUPS` changes.
    public static func client() -> ClientIdentity {
        let raw = getenv("KEYCHAIN_ACCESS_GROUPS")
        if let cached = lastClient.withLock({ $0 }) {
            switch (raw, cached.raw) {
            case (nil, nil): return cached.identity
            case (let raw?, let previous?) where strcmp(raw, previous) == 0: return cached.identity
            default: break
            }
        }
        let identity = ClientIdentity.fromEnvironment()
        lastClient.withLock { $0 = (raw.map { String(cString: $0) }, identity) }
        return identity
    }

    private static func variable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
