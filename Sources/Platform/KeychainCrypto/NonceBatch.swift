import FoundationEssentials

/// Random 96-bit nonces drawn from one batch of the random generator's output, for the many sealed
/// boxes of one operation (a backup seals every item under one key): one call into OpenSSL's DRBG per
/// batch instead of one per box, which is most of what a small seal costs.
///
/// Nonces are not secret, but no two boxes under one key may share one: so a batch belongs to one
/// operation on one thread, a value type kept on its stack, never a process-wide pool (a forked child
/// would hand out the parent's next nonces again) and never copied (each copy would repeat the rest).
public struct NonceBatch: ~Copyable {
    private var bytes: [UInt8]
    private var offset: Int
    private let batchSize: Int

    /// - Parameter expected: about how many nonces the operation needs; a batch holds at most 1,024.
    public init(expected: Int) {
        batchSize = min(max(expected, 1), 1_024) * AESGCM.nonceSize
        bytes = []
        offset = 0
    }

    /// Writes the next nonce into `nonce` (12 bytes), drawing a new batch when this one is spent.
    public mutating func next(into nonce: UnsafeMutableRawBufferPointer) throws {
        guard nonce.count == AESGCM.nonceSize else { throw CryptoError.libraryFailure("nonce size") }
        if offset + AESGCM.nonceSize > bytes.count {
            var fresh = [UInt8](repeating: 0, count: batchSize)
            try fresh.withUnsafeMutableBytes { try Random.fill($0) }
            bytes = fresh
            offset = 0
        }
        bytes.withUnsafeBytes { source in
            nonce.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + AESGCM.nonceSize]))
        }
        offset += AESGCM.nonceSize
    }
}
