import Foundation
import KeychainCrypto
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// SHA-256 of executables, cached by file identity: hashing a large binary takes a while, and every new
/// connection of the same program asks again.
enum ExecutableDigests {
    private static let cache = Mutex<[ExecutableKey: Data]>([:])
    private static let limit = 256

    /// The digest of the open file `descriptor` (read from its start), and its identity.
    static func digest(ofOpenFile descriptor: Int32) -> (key: ExecutableKey, digest: Data)? {
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let key = ExecutableKey(info)
        if let known = cache.withLock({ $0[key] }) { return (key, known) }
        guard let digest = hash(descriptor) else { return nil }
        // The file may have changed while it was read; then the digest is of neither version.
        var after = stat()
        guard fstat(descriptor, &after) == 0, ExecutableKey(after) == key else { return nil }
        cache.withLock { entries in
            if entries.count >= limit { entries.removeAll() }
            entries[key] = digest
        }
        return (key, digest)
    }

    /// The digest of the file at `path`, opened without following a final link (registration).
    static func digest(ofFileAt path: String) -> Data? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        return digest(ofOpenFile: descriptor)?.digest
    }

    private static func hash(_ descriptor: Int32) -> Data? {
        var contents = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: off_t = 0
        while true {
            let count = pread(descriptor, &buffer, buffer.count, offset)
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            contents.append(contentsOf: buffer[..<count])
            offset += off_t(count)
        }
        return try? Digest.sha256(contents)
    }
}
