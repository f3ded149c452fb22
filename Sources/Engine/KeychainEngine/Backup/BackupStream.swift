import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Writes a backup file through a buffer, every byte also into the file's MAC, so that a backup of any
/// size is written in memory that does not grow with it. Errors are the keychain's: a full disk or a
/// file-size limit is `diskFull`, anything else `ioError`.
final class BackupOutput {
    private let descriptor: Int32
    private var buffer: [UInt8] = []
    private var mac: HMACStream?
    private(set) var written = 0

    init(descriptor: Int32) {
        self.descriptor = descriptor
        buffer.reserveCapacity(1 << 16)
    }

    /// Starts the MAC: every byte written from now on (and the header given) goes into it.
    func startAuthenticating(with key: HMACKey, header: Data) throws {
        let stream = try key.stream()
        try stream.update(header)
        mac = stream
        try write(header, authenticated: false)
    }

    func write(_ bytes: Data, authenticated: Bool = true) throws {
        if authenticated, let mac { try mac.update(bytes) }
        buffer.append(contentsOf: bytes)
        if buffer.count >= 1 << 16 { try flush() }
    }

    /// Writes the MAC of everything written, then every buffered byte, and syncs the file.
    func finish() throws {
        guard let mac else { throw KeychainError.internalError("a backup was finished before its MAC began") }
        let tag = try mac.finish()
        buffer.append(contentsOf: tag)
        try flush()
        guard fsync(descriptor) == 0 else { throw Self.failure(errno, "syncing") }
    }

    private func flush() throws {
        var offset = 0
        while offset < buffer.count {
            let count = buffer[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Self.failure(errno, "writing")
            }
            // A file system that takes nothing and reports no error would loop here for ever.
            guard count > 0 else { throw KeychainError.ioError("writing the backup file made no progress") }
            offset += count
        }
        written += buffer.count
        buffer.removeAll(keepingCapacity: true)
    }

    static func failure(_ code: Int32, _ doing: String) -> KeychainError {
        if code == ENOSPC || code == EFBIG || code == EDQUOT { return .diskFull }
        return .ioError("\(doing) the backup file failed: \(String(cString: strerror(code)))")
    }
}

/// Reads a backup file in pieces, every byte of it also into the MAC once that has started. A read
/// past the end, or of a length the file cannot hold, is a damaged file (`decode`), never a crash.
final class BackupInput {
    private let descriptor: Int32
    let size: Int
    private var buffer: [UInt8] = []
    private var position = 0
    private var mac: HMACStream?
    /// Bytes handed out so far.
    private(set) var offset = 0

    init(descriptor: Int32, size: Int) {
        self.descriptor = descriptor
        self.size = size
    }

    var remaining: Int { size - offset }

    /// Starts the MAC over the bytes read so far (the header, given again) and everything after.
    func startAuthenticating(with key: HMACKey, header: Data) throws {
        let stream = try key.stream()
        try stream.update(header)
        mac = stream
    }

    /// The next `count` bytes, into the MAC unless `authenticated` is false (the MAC itself).
    func read(_ count: Int, authenticated: Bool = true) throws -> Data {
        guard count >= 0, count <= remaining else {
            throw KeychainError.decode("the backup file is truncated or damaged (it ends before its data)")
        }
        var out = Data(capacity: count)
        while out.count < count {
            if position == buffer.count { try refill(minimum: count - out.count) }
            let take = min(count - out.count, buffer.count - position)
            out.append(contentsOf: buffer[position..<position + take])
            position += take
        }
        offset += count
        if authenticated, let mac { try mac.update(out) }
        return out
    }

    func readUInt32() throws -> UInt32 {
        let bytes = try read(4)
        return bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
    }

    /// The MAC of everything read since it started.
    func finishMAC() throws -> Data {
        guard let mac else { throw KeychainError.internalError("a backup was read without its MAC") }
        self.mac = nil
        return try mac.finish()
    }

    private func refill(minimum: Int) throws {
        buffer = [UInt8](repeating: 0, count: min(max(minimum, 1 << 16), 1 << 20))
        position = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw KeychainError.ioError("reading the backup file failed: \(String(cString: strerror(errno)))")
            }
            guard count > 0 else {
                throw KeychainError.decode("the backup file is truncated (it ended while being read)")
            }
            buffer.removeSubrange(count...)
            return
        }
    }
}
