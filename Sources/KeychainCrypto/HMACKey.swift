import COpenSSL
import Foundation

/// An HMAC-SHA256 key with its inner and outer digest states precomputed.
///
/// The keychain computes several HMACs per query (the digests of the searchable columns), so the
/// per-call cost matters: starting from saved pad states, copied as plain structs, costs two SHA-256
/// compressions for a short message and no allocation.
public final class HMACKey: @unchecked Sendable {
    // Only read after init, so concurrent use from several threads is safe.
    private let inner: SHA256_CTX
    private let outer: SHA256_CTX

    public init(key: SecureBytes) throws {
        // RFC 2104: keys longer than the 64-byte block are hashed first.
        var block = [UInt8](repeating: 0, count: 64)
        defer { OPENSSL_cleanse(&block, block.count) }
        if key.count > 64 {
            let digest = try key.withUnsafeBytes { try Digest.sha256($0) }
            for (index, byte) in digest.enumerated() { block[index] = byte }
        } else {
            key.withUnsafeBytes { bytes in
                for index in 0..<bytes.count { block[index] = bytes[index] }
            }
        }
        var pad = [UInt8](repeating: 0, count: 64)
        defer { OPENSSL_cleanse(&pad, pad.count) }
        var inner = SHA256_CTX()
        var outer = SHA256_CTX()
        for index in 0..<64 { pad[index] = block[index] ^ 0x36 }
        guard SHA256_Init(&inner) == 1, SHA256_Update(&inner, pad, 64) == 1 else {
            throw CryptoError.libraryFailure("HMAC inner init")
        }
        for index in 0..<64 { pad[index] = block[index] ^ 0x5c }
        guard SHA256_Init(&outer) == 1, SHA256_Update(&outer, pad, 64) == 1 else {
            throw CryptoError.libraryFailure("HMAC outer init")
        }
        self.inner = inner
        self.outer = outer
    }

    deinit {
        // The pad states are derived from the key.
        var inner = self.inner
        var outer = self.outer
        OPENSSL_cleanse(&inner, MemoryLayout<SHA256_CTX>.size)
        OPENSSL_cleanse(&outer, MemoryLayout<SHA256_CTX>.size)
    }

    /// HMAC over the concatenation of `parts`, without building the concatenation.
    public func authenticationCode(_ parts: [UnsafeRawBufferPointer]) throws -> Data {
        var context = inner
        defer { OPENSSL_cleanse(&context, MemoryLayout<SHA256_CTX>.size) }
        var digest = [UInt8](repeating: 0, count: 32)
        for part in parts where part.count > 0 {
            guard SHA256_Update(&context, part.baseAddress, part.count) == 1 else {
                throw CryptoError.libraryFailure("SHA256_Update")
            }
        }
        guard SHA256_Final(&digest, &context) == 1 else { throw CryptoError.libraryFailure("SHA256_Final") }
        context = outer
        guard SHA256_Update(&context, digest, 32) == 1, SHA256_Final(&digest, &context) == 1 else {
            throw CryptoError.libraryFailure("HMAC finish")
        }
        return Data(digest)
    }

    public func authenticationCode(_ message: Data) throws -> Data {
        try message.withUnsafeBytes { try authenticationCode([$0]) }
    }
}
