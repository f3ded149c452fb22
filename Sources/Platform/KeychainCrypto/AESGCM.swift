import COpenSSL
import FoundationEssentials
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
    nonisolated(unsafe) static let cipher: OpaquePointer? = libcrypto.EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    public static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: SecureBytes, authenticating aad: Data
    ) throws -> Data {
        try seal(plaintext, key: key, authenticating: aad) { try Random.fill($0) }
    }

    /// A sealed box whose nonce comes from `nonces`: for many boxes under one key in one operation (a
    /// backup), with one call into the random generator per batch rather than per box.
    public static func seal(
        _ plaintext: SecureBytes, key: SecureBytes, authenticating aad: Data, nonces: inout NonceBatch
    ) throws -> Data {
        try plaintext.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
            try seal(bytes, key: key, authenticating: aad) { try nonces.next(into: $0) }
        }
    }

    /// The same for a plaintext that is not secret (an item's attributes, sealed all the same).
    public static func seal(_ plaintext: Data, key: SecureBytes, authenticating aad: Data, nonces: inout NonceBatch)
        throws -> Data
    {
        try plaintext.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
            try seal(bytes, key: key, authenticating: aad) { try nonces.next(into: $0) }
        }
    }

    private static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: SecureBytes, authenticating aad: Data,
        nonce fillNonce: (UnsafeMutableRawBufferPointer) throws -> Void
    ) throws -> Data {
        guard key.count == keySize else { throw CryptoError.invalidKeySize(expected: keySize, actual: key.count) }
        var box = Data(count: overhead + plaintext.count)
        try box.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) throws in
            let nonce = UnsafeMutableRawBufferPointer(rebasing: out[0..<nonceSize])
            try fillNonce(nonce)
            try key.withUnsafeBytes { keyBytes in
                try aad.withUnsafeBytes { aadBytes in
                    try AESGCMContext.seal(
                        cipher, key: keyBytes, iv: UnsafeRawBufferPointer(nonce), aad: aadBytes, plaintext: plaintext,
                        into: UnsafeMutableRawBufferPointer(rebasing: out[nonceSize..<nonceSize + plaintext.count]),
                        tag: UnsafeMutableRawBufferPointer(rebasing: out[(nonceSize + plaintext.count)...]))
                }
            }
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
            try key.withUnsafeBytes { keyBytes in
                try aad.withUnsafeBytes { aadBytes in
                    try AESGCMContext.open(
                        cipher, key: keyBytes, iv: UnsafeRawBufferPointer(rebasing: input[0..<nonceSize]),
                        aad: aadBytes,
                        ciphertext: UnsafeRawBufferPointer(rebasing: input[nonceSize..<nonceSize + plaintextCount]),
                        tag: UnsafeRawBufferPointer(rebasing: input[(nonceSize + plaintextCount)...]), into: out)
                }
            }
        }
    }
}
