import COpenSSL

/// Key material in memory that is wiped when released.
///
/// Swift's `Data` and `[UInt8]` may be copied or moved by the runtime without a chance to clear the old
/// storage, so every key the keychain holds lives in one of these instead: a single heap buffer that is
/// never reallocated and is overwritten with `OPENSSL_cleanse` before it is freed.
public final class SecureBytes: @unchecked Sendable {
    // Immutable after init, so sharing between threads is safe.
    private let storage: UnsafeMutableRawBufferPointer
    public let count: Int

    /// Fills a new buffer of `count` bytes through `body`, which writes into raw memory.
    public convenience init(count: Int, filling body: (UnsafeMutableRawBufferPointer) throws -> Void)
        throws
    {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Swift.max(count, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        do {
            try body(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
        } catch {
            OPENSSL_cleanse(buffer.baseAddress, buffer.count)
            buffer.deallocate()
            throw error
        }
        self.init(adopting: buffer, count: count)
    }

    private init(adopting buffer: UnsafeMutableRawBufferPointer, count: Int) {
        self.storage = buffer
        self.count = count
    }

    /// Fresh random bytes from OpenSSL's CSPRNG.
    public convenience init(randomCount count: Int) throws {
        try self.init(count: count) { buffer throws in
            try Random.fill(buffer)
        }
    }

    /// Copies `bytes` into a wiped-on-release buffer. The caller should clear its own copy if it can.
    public convenience init<Bytes: Collection>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        let count = bytes.count
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Swift.max(count, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        _ = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]).initializeMemory(as: UInt8.self, from: bytes)
        self.init(adopting: buffer, count: count)
    }

    deinit {
        OPENSSL_cleanse(storage.baseAddress, storage.count)
        storage.deallocate()
    }

    /// Read access to the bytes; the pointer must not escape `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    /// Constant-time equality, for comparing secrets.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        return withUnsafeBytes { mine in
            other.withUnsafeBytes { theirs in
                CRYPTO_memcmp(mine.baseAddress, theirs.baseAddress, count) == 0
            }
        }
    }
}
