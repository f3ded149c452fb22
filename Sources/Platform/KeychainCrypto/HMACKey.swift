import COpenSSL
import Foundation
import KeychainBytes

/// An HMAC-SHA256 key with its inner and outer digest states precomputed.
///
/// The keychain computes several HMACs per query (the digests of the searchable columns), so the
/// per-call cost matters: starting from saved pad states, copied as plain structs, costs two SHA-256
/// compressions for a short message and no allocation. The pad states are derived from the key, so
/// they live in pinned, wiped memory like the key itself.
public final class HMACKey: Sendable {
    /// The inner pad state followed by the outer one.
    private let states: SecureBytes
    private static let stateSize = MemoryLayout<SHA256_CTX>.size

    /// - Parameter pinned: whether the pad states are pinned (see `SecureBytes`): yes for keys held for
    ///   long, no for the short-lived ones of a single derivation.
    public init(key: SecureBytes, pinned: Bool = true) throws {
        // RFC 2104: keys longer than the 64-byte block are hashed first.
        var block = [UInt8](repeating: 0, count: 64)
        defer { OPENSSL_cleanse(&block, block.count) }
        if key.count > 64 {
            var digest = try key.withUnsafeBytes { try Digest.sha256($0) }
            for (index, byte) in digest.enumerated() { block[index] = byte }
            digest.resetBytes(in: 0..<digest.count)
        } else {
            key.withUnsafeBytes { bytes in
                for index in 0..<bytes.count { block[index] = bytes[index] }
            }
        }
        states = try SecureBytes(count: 2 * Self.stateSize, pinned: pinned) { out in
            var pad = [UInt8](repeating: 0, count: 64)
            defer { OPENSSL_cleanse(&pad, pad.count) }
            var context = SHA256_CTX()
            defer { OPENSSL_cleanse(&context, Self.stateSize) }
            for (offset, mask) in [(0, UInt8(0x36)), (Self.stateSize, UInt8(0x5c))] {
                for index in 0..<64 { pad[index] = block[index] ^ mask }
                guard SHA256_Init(&context) == 1, SHA256_Update(&context, pad, 64) == 1 else {
                    throw CryptoError.libraryFailure("HMAC pad init")
                }
                withUnsafeBytes(of: &context) { state in
                    UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + Self.stateSize]).copyMemory(
                        from: state)
                }
            }
        }
    }

    /// HMAC over the concatenation of `parts`, without building the concatenation, written to the
    /// 32 bytes at `out` (a key's own buffer, when the result is a key).
    public func authenticationCode(_ parts: [UnsafeRawBufferPointer], into out: UnsafeMutableRawBufferPointer) throws {
        guard out.count >= 32, let result = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw CryptoError.libraryFailure("HMAC output buffer too small")
        }
        var context = states.withUnsafeBytes { $0.load(as: SHA256_CTX.self) }
        defer { OPENSSL_cleanse(&context, Self.stateSize) }
        for part in parts where part.count > 0 {
            guard SHA256_Update(&context, part.baseAddress, part.count) == 1 else {
                throw CryptoError.libraryFailure("SHA256_Update")
            }
        }
        guard SHA256_Final(result, &context) == 1 else { throw CryptoError.libraryFailure("SHA256_Final") }
        context = states.withUnsafeBytes { $0.load(fromByteOffset: Self.stateSize, as: SHA256_CTX.self) }
        guard SHA256_Update(&context, result, 32) == 1, SHA256_Final(result, &context) == 1 else {
            throw CryptoError.libraryFailure("HMAC finish")
        }
    }

    /// HMAC over the concatenation of `parts`, for MACs and digests that are not keys.
    public func authenticationCode(_ parts: [UnsafeRawBufferPointer]) throws -> Data {
        var digest = Data(count: 32)
        try digest.withUnsafeMutableBytes { try authenticationCode(parts, into: $0) }
        return digest
    }

    public func authenticationCode(_ message: Data) throws -> Data {
        try message.withUnsafeBytes { try authenticationCode([$0]) }
    }
}
