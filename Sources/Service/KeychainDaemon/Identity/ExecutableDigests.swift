import Foundation
import KeychainCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// SHA-256 of executables, cached by file identity: hashing a large binary takes a while, and every new
/// connection of the same program asks again.
enum ExecutableDigests {
    /// Digests by file identity, oldest first for eviction, and the files being hashed now. Guarded by
    /// `lock`, which waiters on a hash in progress also wait on.
    nonisolated(unsafe) private static var cache: [ExecutableKey: Data] = [:]
    nonisolated(unsafe) private static var order: [ExecutableKey] = []
    nonisolated(unsafe) private static var hashing: Set<ExecutableKey> = []
    private static let lock = NSCondition()
    private static let limit = 256
    /// Executables larger than this are not hashed (nor trusted): a sparse file of many gigabytes would
    /// otherwise cost the daemon minutes of reading for one connection.
    static let maximumSize: Int64 = 1 << 30

    /// The digest of the open file `descriptor` (read from its start), and its identity.
    ///
    /// One hash per file at a time: a burst of connections from a large new executable reads it once
    /// and the others wait for that digest; other executables are hashed meanwhile.
    static func digest(ofOpenFile descriptor: Int32) -> (key: ExecutableKey, digest: Data)? {
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let key = ExecutableKey(info)
        guard key.size <= maximumSize else { return nil }
        lock.lock()
        while true {
            if let known = cache[key] {
                lock.unlock()
                return (key, known)
            }
            if !hashing.contains(key) { break }
            lock.wait()
        }
        hashing.insert(key)
        lock.unlock()
        let digest = hash(descriptor, key: key)
        lock.lock()
        hashing.remove(key)
        if let digest {
            if cache.count >= limit, !order.isEmpty { cache[order.removeFirst()] = nil }
            cache[key] = digest
            order.append(key)
        }
        lock.broadcast()
        lock.unlock()
        return digest.map { (key, $0) }
    }

    /// The digest of the file at `path`, opened without following a final link (registration).
    static func digest(ofFileAt path: String) -> Data? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        return digest(ofOpenFile: descriptor)?.digest
    }

    /// Streams the file through SHA-256 a megabyte at a time; nil when it changed while it was read
    /// (then the digest is of neither version).
    private static func hash(_ descriptor: Int32, key: ExecutableKey) -> Data? {
        guard let stream = try? SHA256Stream() else { return nil }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: off_t = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, offset) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            guard
                (try? buffer.withUnsafeBytes { try stream.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) })
                    != nil, Int64(offset) + Int64(count) <= maximumSize
            else { return nil }
            offset += off_t(count)
        }
        var after = stat()
        guard fstat(descriptor, &after) == 0, ExecutableKey(after) == key else { return nil }
        return try? stream.finish()
    }
}
