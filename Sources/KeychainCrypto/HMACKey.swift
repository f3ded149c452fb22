import COpenSSL
import Foundation

/// An HMAC-SHA256 key with its inner and outer digest states precomputed.
///
/// The keychain computes an HMAC for every searchable attribute of every query, so the per-call cost
/// matters: starting from saved pad states saves two compression rounds and every OpenSSL lookup.
public final class HMACKey: @unchecked Sendable {
    // Both contexts are only read (copied from) after init, which OpenSSL allows from any thread.
    private let inner: OpaquePointer
    private let outer: OpaquePointer
    public static let outputSize = 32

    nonisolated(unsafe) private static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    public init(key: SecureBytes) throws {
        guard let inner = EVP_MD_CTX_new(), let outer = EVP_MD_CTX_new() else {
            throw CryptoError.libraryFailure("EVP_MD_CTX_new")
        }
        self.inner = inner
        self.outer = outer
        // RFC 2104: keys longer than the 64-byte block are hashed first.
        var block = [UInt8](repeating: 0, count: 64)
        defer { OPENSSL_cleanse(&block, block.count) }
        if key.count > 64 {
            let digest = try key.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
                try Digest.sha256(bytes)
            }
            for (index, byte) in digest.enumerated() { block[index] = byte }
        } else {
            key.withUnsafeBytes { bytes in
                for index in 0..<bytes.count { block[index] = bytes[index] }
            }
        }
        var pad = [UInt8](repeating: 0, count: 64)
        defer { OPENSSL_cleanse(&pad, pad.count) }
        for index in 0..<64 { pad[index] = block[index] ^ 0x36 }
        guard EVP_DigestInit_ex2(inner, HMACKey.sha256, nil) == 1, EVP_DigestUpdate(inner, pad, 64) == 1 else {
            throw CryptoError.libraryFailure("HMAC inner init")
        }
        for index in 0..<64 { pad[index] = block[index] ^ 0x5c }
        guard EVP_DigestInit_ex2(outer, HMACKey.sha256, nil) == 1, EVP_DigestUpdate(outer, pad, 64) == 1 else {
            throw CryptoError.libraryFailure("HMAC outer init")
        }
    }

    deinit {
        // EVP_MD_CTX_free cleanses the digest state, which is derived from the key.
        EVP_MD_CTX_free(inner)
        EVP_MD_CTX_free(outer)
    }

    /// HMAC over the concatenation of `parts`, without building the concatenation.
    public func authenticationCode(_ parts: [UnsafeRawBufferPointer]) throws -> Data {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.libraryFailure("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_MD_CTX_copy_ex(context, inner) == 1 else { throw CryptoError.libraryFailure("EVP_MD_CTX_copy_ex") }
        for part in parts where part.count > 0 {
            guard EVP_DigestUpdate(context, part.baseAddress, part.count) == 1 else {
                throw CryptoError.libraryFailure("EVP_DigestUpdate")
            }
        }
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1,
            EVP_MD_CTX_copy_ex(context, outer) == 1,
            EVP_DigestUpdate(context, digest, 32) == 1,
            EVP_DigestFinal_ex(context, &digest, &length) == 1
        else { throw CryptoError.libraryFailure("HMAC finish") }
        return Data(digest)
    }

    public func authenticationCode(_ message: Data) throws -> Data {
        try message.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
            try authenticationCode([bytes])
        }
    }
}
