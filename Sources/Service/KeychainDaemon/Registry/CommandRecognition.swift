import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Recognises the `security` command by its contents, whatever a registration request says: the
/// command runs whatever any process of its user tells it, so its registry entry must be a
/// general-purpose tool even when an older client, or any other registrar, did not mark it so, and an
/// entry written before tools existed is one too. The command known is the one installed beside this
/// daemon (the same build), and those in `/usr/local/bin` and `/usr/bin`: each is two executables,
/// `security` and `security-full` (the verbs the lean half hands on), and both are the command.
final class CommandRecognition: Sendable {
    private let known = Mutex<[String: (key: ExecutableKey, digest: Data)]>([:])
    private let candidates: [String]

    /// The file names of the command's two halves (the command's `CommandPair` names them too: the
    /// daemon does not link the command's code).
    static let names = ["security", "security-full"]

    init() {
        var directories = ["/usr/local/bin", "/usr/bin"]
        if let own = realpath("/proc/self/exe", nil) {
            directories.insert((String(cString: own) as NSString).deletingLastPathComponent, at: 0)
            free(own)
        }
        candidates = directories.flatMap { directory in
            Self.names.map { (directory as NSString).appendingPathComponent($0) }
        }
    }

    /// Whether `digest` is the digest of one of the known `security` commands as they are now.
    func isTheSecurityCommand(_ digest: Data) -> Bool {
        candidates.contains { commandDigest(at: $0) == digest }
    }

    /// The digest of the command at `path` (links resolved), kept while its file identity is the same.
    private func commandDigest(at path: String) -> Data? {
        guard let resolved = realpath(path, nil) else { return nil }
        let file = String(cString: resolved)
        free(resolved)
        var info = stat()
        guard stat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let key = ExecutableKey(info)
        if let held = known.withLock({ $0[file] }), held.key == key { return held.digest }
        guard let digest = ExecutableDigests.digest(ofFileAt: file) else { return nil }
        known.withLock { $0[file] = (key, digest) }
        return digest
    }
}
