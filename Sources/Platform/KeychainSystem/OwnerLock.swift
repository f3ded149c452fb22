import FoundationEssentials
import KeychainBytes
import KeychainCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Who owns a keychain directory while it is open: one daemon alone (an exclusive lock held for the
/// daemon's life), or any number of processes that open the files themselves (embedded: shared locks).
/// Either excludes the other, so a keychain never has two lock states at once: a second daemon on a
/// keychain another one serves refuses to start, naming the first, and an embedded process refuses a
/// keychain a daemon owns.
///
/// The lock is `owner.lock` in the directory, an advisory `flock`. It guards against mistakes and
/// other users (the directory is the caller's 0700), not against a process of the keychain's own user,
/// which can remove the file while it is held.
public final class OwnerLock: Sendable {
    public static let fileName = "owner.lock"

    private let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Takes the directory for a daemon, recording `holder` (its pid and socket) for the message a
    /// second one gets.
    public static func claim(directory: String, holder: String) throws -> OwnerLock {
        let descriptor = try openLockFile(in: directory)
        guard lock(descriptor, LOCK_EX) else {
            let shared = lock(descriptor, LOCK_SH)
            if shared { _ = flock(descriptor, LOCK_UN) }
            let current = recordedHolder(descriptor)
            close(descriptor)
            if shared {
                throw KeychainError.notAvailable(
                    "the keychain in \(directory) is open in other processes without a daemon (embedded); a daemon can serve it once they end"
                )
            }
            throw KeychainError.notAvailable(
                "another keychain daemon already serves the keychain in \(directory)\(current.map { " (\($0))" } ?? ""): one keychain has one owner"
            )
        }
        // The record only makes a second daemon's message more useful: the lock is what counts, so a
        // write that fails (a full disk) does not stop the daemon.
        let record = Data((holder + "\n").utf8)
        _ = record.withUnsafeBytes { bytes in
            ftruncate(descriptor, 0) == 0 ? pwrite(descriptor, bytes.baseAddress, bytes.count, 0) : -1
        }
        return OwnerLock(descriptor: descriptor)
    }

    /// Takes the directory for a process that opens the files itself; refused while a daemon owns it.
    public static func share(directory: String) throws -> OwnerLock {
        let descriptor = try openLockFile(in: directory)
        guard lock(descriptor, LOCK_SH) else {
            let current = recordedHolder(descriptor)
            close(descriptor)
            throw KeychainError.notAvailable(
                "the keychain daemon\(current.map { " (\($0))" } ?? "") owns the keychain in \(directory): use it through its socket (KEYCHAIN_SOCKET) instead of opening the files"
            )
        }
        return OwnerLock(descriptor: descriptor)
    }

    /// Non-blocking: a keychain that is owned otherwise is refused at once, not waited for.
    private static func lock(_ descriptor: Int32, _ operation: Int32) -> Bool {
        while flock(descriptor, operation | LOCK_NB) != 0 {
            if errno != EINTR { return false }
        }
        return true
    }

    private static func openLockFile(in directory: String) throws -> Int32 {
        let path = PathText.join(directory, fileName)
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw KeychainError.notAvailable("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(),
            info.st_mode & 0o077 == 0
        else {
            close(descriptor)
            throw KeychainError.notAvailable("\(path) is not a private file of this user; refusing the keychain")
        }
        return descriptor
    }

    /// What the daemon holding the lock wrote about itself (one short line), if anything.
    private static func recordedHolder(_ descriptor: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self).trimmingWhitespace
        guard !text.isEmpty, text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7f }) else {
            return nil
        }
        return text
    }
}
