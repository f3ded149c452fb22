import Foundation
import KeychainCore
import Synchronization

/// Who one connection's process is, as far as the registry goes: worked out from the kernel's facts
/// (never from anything the client says), kept while the process runs the same executable, and worked
/// out again when it has run `exec` since.
final class CallerIdentity: Sendable {
    let peer: PeerProcess
    private let known = Mutex<(key: ExecutableKey, executable: Result<RunningExecutable, KeychainError>)?>(nil)

    /// The last refusal logged for this connection: one line per reason, not one per request.
    private let loggedRefusal = Mutex<String?>(nil)

    init(peer: PeerProcess) { self.peer = peer }

    /// Whether `reason` differs from the last refusal logged for this connection (and records it).
    func isNewRefusal(_ reason: String) -> Bool {
        loggedRefusal.withLock { logged in
            defer { logged = reason }
            return logged != reason
        }
    }

    /// The executable the peer runs now, or why it cannot be identified.
    func executable() -> Result<RunningExecutable, KeychainError> {
        guard let key = peer.executableKey() else { return .failure(gone) }
        if let cached = known.withLock({ $0 }), cached.key == key { return cached.executable }
        let executable = identify()
        if case .success(let found) = executable { known.withLock { $0 = (found.key, executable) } }
        return executable
    }

    private var gone: KeychainError { .missingEntitlement("the calling process \(peer.pid) has ended") }

    private func identify() -> Result<RunningExecutable, KeychainError> {
        guard let descriptor = peer.openExecutable() else { return .failure(gone) }
        defer { close(descriptor) }
        guard let path = peer.executablePath(), let (key, digest) = ExecutableDigests.digest(ofOpenFile: descriptor)
        else { return .failure(.missingEntitlement("the executable of process \(peer.pid) cannot be read")) }
        if let variable = peer.injectingVariable() {
            return .failure(
                .missingEntitlement(
                    "process \(peer.pid) (\(path)) runs with \(variable) set, so it may not be that program"))
        }
        if peer.isTraced() {
            return .failure(.missingEntitlement("process \(peer.pid) (\(path)) is being traced"))
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
