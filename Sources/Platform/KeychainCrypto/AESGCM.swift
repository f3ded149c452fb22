import COpenSSL
import Foundation
import KeychainBytes

/// AES-256-GCM with a random 96-bit nonce and a 128-bit tag.
///
/// A sealed box is `nonce (12) ‖ ciphertext ‖ tag (16)`. Random nonces are safe here because every item
/// key encrypts a handful of messages in its life, far below the 2^32 bound for random 96-bit nonces.
public enum AESGCM {
    public static let keySize = 32
    public static let nonceSize = 12
    public static let tagSize = 16
    /// Bytes a sealed box adds to its plaintext.
    public static let overhead = nonceSize + tagSize

    // Fetched once: looking the algorithm up costs more than a small encryption.
    nonisolated(unsafe) private static let cipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    public static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: SecureBytes, authenticating aad: Data
    ) throws -> Data {
        guard key.count == keySize else { throw CryptoError.invalidKeySize(expected: keySize, actual: key.count) }
        var box = Data(count: overhead + plaintext.count)
        try box.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) throws in
            guard let base = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                throw CryptoError.libraryFailure("empty output buffer")
            }
            try Random.fill(UnsafeMutableRawBufferPointer(rebasing: out[0..<nonceSize]))
            guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.libraryFailure("EVP_CIPHER_CTX_new") }
            defer { EVP_CIPHER_CTX_free(context) }
            try key.withUnsafeBytes { (keyBytes: UnsafeRawBufferPointer) throws in
                guard
                    EVP_EncryptInit_ex2(
                        context, cipher, AESGCM.bytes(keyBytes), base, nil) == 1
                else { throw CryptoError.libraryFailure("EVP_EncryptInit_ex2") }
            }
            var written: Int32 = 0
            try aad.withUnsafeBytes { (aadBytes: UnsafeRawBufferPointer) throws in
                guard aadBytes.count > 0 else { return }
                guard
                    EVP_EncryptUpdate(
                        context, nil, &written, AESGCM.bytes(aadBytes),
                        Int32(aadBytes.count)) == 1
                else { throw CryptoError.libraryFailure("EVP_EncryptUpdate(aad)") }
            }
            if plaintext.count > 0 {
                guard
                    EVP_EncryptUpdate(
                        context, base + nonceSize, &written,
                        AESGCM.bytes(plaintext), Int32(plaintext.count)) == 1
                else { throw CryptoError.libraryFailure("EVP_EncryptUpdate") }
            }
            var finalLength: Int32 = 0
            guard EVP_EncryptFinal_ex(context, base + nonceSize + plaintext.count, &finalLength) == 1 else {
                throw CryptoError.libraryFailure("EVP_EncryptFinal_ex")
            }
            guard
                EVP_CIPHER_CTX_ctrl(
                    context, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), base + nonceSize + plaintext.count) == 1
            else { throw CryptoError.libraryFailure("EVP_CTRL_GCM_GET_TAG") }
        }
        return box
    }

    public static func seal(_ plaintext: Data, key: SecureBytes, authenticating aad: Data) throws
        -> Data
    {
        try plaintext.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
            try seal(bytes, key: key, authenticating: aad)
        }
    }

    public static func seal(_ plaintext: SecureBytes, key: SecureBytes, authenticating aad: Data)
        throws -> Data
    {
        try plaintext.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
            try seal(bytes, key: key, authenticating: aad)
        }
    }

    /// Opens a sealed box into a wiped-on-release buffer (for keys and other secrets).
    public static func openSecure(_ box: Data, key: SecureBytes, authenticating aad: Data) throws
        -> SecureBytes
    {
        guard box.count >= overhead else { throw CryptoError.malformedCiphertext }
        return try SecureBytes(count: box.count - overhead) { (out: UnsafeMutableRawBufferPointer) throws in
            try open(box, key: key, aad: aad, into: out)
        }
    }

    /// Opens a sealed box into `Data`, for plaintext that is handed back to the caller anyway.
    public static func open(_ box: Data, key: SecureBytes, authenticating aad: Data) throws -> Data {
        guard box.count >= overhead else { throw CryptoError.malformedCiphertext }
        var plaintext = Data(count: box.count - overhead)
        try plaintext.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) throws in
            try open(box, key: key, aad: aad, into: out)
        }
        return plaintext
    }

    private static func open(_ box: Data, key: SecureBytes, aad: Data, into out: UnsafeMutableRawBufferPointer)
        throws
    {
        guard key.count == keySize else { throw CryptoError.invalidKeySize(expected: keySize, actual: key.count) }
        let plaintextCount = box.count - overhead
        try box.withUnsafeBytes { (input: UnsafeRawBufferPointer) throws in
            guard let base = input.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                throw CryptoError.malformedCiphertext
            }
            guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.libraryFailure("EVP_CIPHER_CTX_new") }
            defer { EVP_CIPHER_CTX_free(context) }
            try key.withUnsafeBytes { (keyBytes: UnsafeRawBufferPointer) throws in
                guard
                    EVP_DecryptInit_ex2(
                        context, cipher, AESGCM.bytes(keyBytes), base, nil) == 1
                else { throw CryptoError.libraryFailure("EVP_DecryptInit_ex2") }
            }
            var written: Int32 = 0
            try aad.withUnsafeBytes { (aadBytes: UnsafeRawBufferPointer) throws in
                guard aadBytes.count > 0 else { return }
                guard
                    EVP_DecryptUpdate(
                        context, nil, &written, AESGCM.bytes(aadBytes),
                        Int32(aadBytes.count)) == 1
                else { throw CryptoError.libraryFailure("EVP_DecryptUpdate(aad)") }
            }
            if plaintextCount > 0 {
                guard
                    EVP_DecryptUpdate(
                        context, AESGCM.mutableBytes(out), &written, base + nonceSize,
                        Int32(plaintextCount)) == 1
                else { throw CryptoError.libraryFailure("EVP_DecryptUpdate") }
            }
            // The API takes a non-const pointer for the tag but only reads it.
            let tag = UnsafeMutableRawPointer(mutating: base + nonceSize + plaintextCount)
            guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagSize), tag) == 1 else {
                throw CryptoError.libraryFailure("EVP_CTRL_GCM_SET_TAG")
            }
            var finalLength: Int32 = 0
            let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: 16)
            defer { scratch.deallocate() }
            guard EVP_DecryptFinal_ex(context, scratch, &finalLength) == 1 else {
                OPENSSL_cleanse(out.baseAddress, out.count)
                throw CryptoError.authenticationFailed
            }
        }
    }

    /// The buffer's bytes as OpenSSL takes them; callers pass non-empty buffers (checked counts), and an
    /// empty one becomes a null pointer, which OpenSSL accepts for zero lengths.
    private static func bytes(_ buffer: UnsafeRawBufferPointer) -> UnsafePointer<UInt8>? {
        buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }

    private static func mutableBytes(_ buffer: UnsafeMutableRawBufferPointer) -> UnsafeMutablePointer<UInt8>? {
        buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }
}
