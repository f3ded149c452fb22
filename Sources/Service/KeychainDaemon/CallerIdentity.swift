import Foundation
import KeychainCore
import Synchronization

/// Who one connection's process is, as far as the registry goes: worked out once, when the connection
/// is accepted, from the kernel's facts (never from anything the client says). A connection belongs to
/// the program that opened it: if the process later runs another executable (`exec`), the connection
/// is closed rather than identified again, so a process cannot connect first and then become a
/// registered program with the connection still in hand.
final class CallerIdentity: Sendable {
    let peer: PeerProcess
    /// The running executable's file identity when the connection was accepted.
    private let initialKey: ExecutableKey?
    /// The identification made then, kept for the connection's life.
    let identified: Result<RunningExecutable, KeychainError>

    /// The last refusal logged for this connection: one line per reason, not one per request.
    private let loggedRefusal = Mutex<String?>(nil)
    /// Whether the daemon knows this executable as a general-purpose tool, worked out once per
    /// connection (the executable cannot change under it: an exec closes the connection).
    private let knownTool = Mutex<Bool?>(nil)

    /// `decide` once, then its answer for the connection's life.
    func isKnownTool(_ decide: () -> Bool) -> Bool {
        if let known = knownTool.withLock({ $0 }) { return known }
        let answer = decide()
        knownTool.withLock { $0 = answer }
        return answer
    }

    /// `connection` is the daemon's end of the socket (nil for a caller on a message bus, whose
    /// connection is the bus's, not the daemon's, to check). `requiringUndumpable`: whether a process of
    /// another user than root must have made itself non-dumpable (system mode, where the daemon is
    /// another user and may look into such a process; a daemon of the client's own user cannot).
    init(peer: PeerProcess, connection: Int32?, requiringUndumpable: Bool) {
        self.peer = peer
        initialKey = peer.executableKey()
        identified = Self.identify(peer, connection: connection, requiringUndumpable: requiringUndumpable)
    }

    /// Whether `reason` differs from the last refusal logged for this connection (and records it).
    func isNewRefusal(_ reason: String) -> Bool {
        loggedRefusal.withLock { logged in
            defer { logged = reason }
            return logged != reason
        }
    }

    /// Whether the process runs another executable than when it connected (or has ended, or can no
    /// longer be looked into). A process whose executable could not be read at all when it connected
    /// was never identified: its item requests are refused whatever it runs now, and this is false.
    var hasChangedExecutable: Bool {
        guard let initialKey else { return false }
        guard let now = peer.executableKey() else { return true }
        return now != initialKey
    }

    private static func identify(_ peer: PeerProcess, connection: Int32?, requiringUndumpable: Bool) -> Result<
        RunningExecutable, KeychainError
    > {
        let gone = KeychainError.missingEntitlement("the calling process \(peer.pid) has ended")
        guard let descriptor = peer.openExecutable() else {
            guard peer.isAlive else { return .failure(gone) }
            // The kernel lets a process of the same user look into another only while that one is
            // dumpable (root, or CAP_SYS_PTRACE, always may).
            return .failure(
                .missingEntitlement(
                    "process \(peer.pid) cannot be looked into: it made itself non-dumpable, and a daemon running as its own user (not root) cannot read such a process's executable; clients of a per-user daemon stay dumpable (the Security library and the security command do so by themselves)"
                ))
        }
        defer { close(descriptor) }
        guard let path = peer.executablePath(), let (key, digest) = ExecutableDigests.digest(ofOpenFile: descriptor)
        else {
            return .failure(
                .missingEntitlement("the executable of process \(peer.pid) cannot be read, or is over 1 GiB"))
        }
        func refuse(_ reason: String) -> Result<RunningExecutable, KeychainError> {
            .failure(.missingEntitlement("process \(peer.pid) (\(path)) \(reason)"))
        }
        if !peer.sharesUserNamespace {
            // Inside its own user namespace a process can mount its own /etc (ld.so.preload) or libraries.
            return refuse("runs in a user namespace of its own (a container, or unshare)")
        }
        if requiringUndumpable, peer.uid != 0, peer.isDumpable {
            return refuse(
                "is dumpable: other processes of its user could take its descriptors or memory (a client of the system daemon must call prctl(PR_SET_DUMPABLE, 0) before connecting, as the Security library does)"
            )
        }
        switch peer.environmentCheck() {
        case .clean: break
        case .injecting(let variable): return refuse("runs with \(variable) set, so it may not be that program")
        case .unreadable:
            // Every check fails closed: a process whose loader variables cannot be seen is not trusted.
            return refuse("has an environment the daemon cannot read, so its loader variables cannot be checked")
        }
        if peer.isTraced() { return refuse("is being traced") }
        // The connection must be this program's own: opened by it (closed on exec), and still in its hands.
        // One that is inheritable may have been opened by another program before an exec; one it does
        // not hold belongs to another process (a child it forked before the exec, say). A bus
        // connection is the bus's to hold; docs/security.md says what that leaves open.
        if let connection {
            switch peer.holding(connection: connection) {
            case .ownedByThisProgram: break
            case .inheritable:
                return refuse(
                    "holds the connection without close-on-exec: it may have come from the program before an exec")
            case .notHeld: return refuse("does not hold the connection: another process speaks on it")
            case .unknown:
                return refuse("cannot be matched to the connection (the kernel's sock_diag did not answer)")
            }
        }
        if let foreign = peer.foreignCode(executable: key) {
            return refuse("runs code from \(foreign), not from a file owned by root and writable by no one else")
        }
        // Everything above was read through /proc/<pid>: it described the process that connected only if
        // that process is still there now.
        guard peer.isAlive else { return .failure(gone) }
        return .success(RunningExecutable(path: path, key: key, digest: digest))
    }
}

/// An executable as the daemon found it running.
struct RunningExecutable: Sendable {
    let path: String
    let key: ExecutableKey
    let digest: Data

    /// The registry entry that grants this executable its groups: the one for its path whose digest is
    /// its digest (or, with development entries honoured, one that trusts the path alone).
    func registration(in apps: [AppRegistration], development: Bool) -> Result<AppRegistration, KeychainError> {
        guard let entry = apps.first(where: { $0.executablePath == path }) else {
            return .failure(
                .missingEntitlement("\(path) is not registered with the keychain daemon (security app register)"))
        }
        if let registered = entry.executableDigest {
            guard registered == digest else {
                return .failure(.missingEntitlement("\(path) has changed since it was registered; register it again"))
            }
            return .success(entry)
        }
        guard development else {
            return .failure(
                .missingEntitlement(
                    "\(path) is registered for development (trusted by path), and this daemon does not run in development mode"
                ))
        }
        return .success(entry)
    }
}
