import COpenSSL
import FoundationEssentials
import KeychainBytes

/// AES-128-CBC with PKCS#7 padding: what the freedesktop Secret Service's
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7` sessions carry secrets in (the IV travels as the secret's
/// parameters). It is not authenticated, and a decryption that fails on its padding says so: whoever
/// could submit ciphertexts under a session's key and see that answer would have a padding oracle.
/// So a service decrypts only for the connection that opened the session (which holds the key
/// anyway), and the bus, not this cipher, keeps others from changing what crosses it.
public enum AESCBC {
    public static let keySize = 16
    public static let blockSize = 16

    // Fetched once: looking the algorithm up costs more than a small encryption.
    nonisolated(unsafe) private static let cipher: OpaquePointer? = libcrypto.EVP_CIPHER_fetch(nil, "AES-128-CBC", nil)

    /// `plaintext`, padded and encrypted under `key` (16 bytes) with a fresh random IV, returned with it.
    public static func encrypt(_ plaintext: SecureBytes, key: SecureBytes) throws -> (iv: Data, ciphertext: Data) {
        let iv = try Random.bytes(blockSize)
        return (iv, try encrypt(plaintext, key: key, iv: iv))
    }

    /// `plaintext`, padded and encrypted under `key` with `iv` (16 bytes each). The IV must never
    /// have been used with this key before: `encrypt(_:key:)` draws one.
    public static func encrypt(_ plaintext: SecureBytes, key: SecureBytes, iv: Data) throws -> Data {
        var output = Data(count: plaintext.count + blockSize)
        let written = try output.withUnsafeMutableBytes { out in
            try plaintext.withUnsafeBytes { input in
                try run(encrypting: true, key: key, iv: iv, input: input, into: out)
            }
        }
        return output.prefix(written)
    }

    /// The plaintext of `ciphertext`, in wiped memory; `.authenticationFailed` when its length or
    /// padding is not one an encryption under this key and IV makes (a wrong key, or damaged bytes).
    public static func decrypt(_ ciphertext: Data, key: SecureBytes, iv: Data) throws -> SecureBytes {
        try decrypt(ciphertext, key: key, iv: iv, padded: true)
    }

    /// The plaintext of `ciphertext` (whole blocks) encrypted without padding, as formats that pad
    /// themselves write it (gnome-keyring's keyring files, zero-padded); `.authenticationFailed` when
    /// it is not whole blocks. Nothing is checked: such a format carries its own check.
    public static func decryptUnpadded(_ ciphertext: Data, key: SecureBytes, iv: Data) throws -> SecureBytes {
        try decrypt(ciphertext, key: key, iv: iv, padded: false)
    }

    private static func decrypt(_ ciphertext: Data, key: SecureBytes, iv: Data, padded: Bool) throws -> SecureBytes {
        guard !ciphertext.isEmpty, ciphertext.count % blockSize == 0 else { throw CryptoError.authenticationFailed }
        var buffer = [UInt8](repeating: 0, count: ciphertext.count + blockSize)
        defer { buffer.withUnsafeMutableBytes { SecureMemory.wipe($0) } }
        let written = try buffer.withUnsafeMutableBytes { out in
            try ciphertext.withUnsafeBytes { input in
                try run(encrypting: false, key: key, iv: iv, input: input, into: out, padded: padded)
            }
        }
        return buffer.withUnsafeBytes { SecureBytes(copying: $0.prefix(written)) }
    }

    private static func run(
        encrypting: Bool, key: SecureBytes, iv: Data, input: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer, padded: Bool = true
    ) throws(CryptoError) -> Int {
        guard key.count == keySize else { throw .invalidKeySize(expected: keySize, actual: key.count) }
        guard iv.count == blockSize else { throw .libraryFailure("a CBC IV is 16 bytes") }
        guard input.count <= Int(Int32.max) - blockSize, output.count >= input.count + blockSize else {
            throw .libraryFailure("CBC buffer size")
        }
        guard let cipher, let context = libcrypto.EVP_CIPHER_CTX_new() else { throw .libraryFailure("no AES-128-CBC") }
        defer { libcrypto.EVP_CIPHER_CTX_free(context) }
        let keyed = key.withUnsafeBytes { keyBytes in
            iv.withUnsafeBytes { ivBytes in
                libcrypto.EVP_CipherInit_ex2(
                    context, cipher, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    ivBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), encrypting ? 1 : 0, nil)
            }
        }
        guard keyed == 1 else {
            libcrypto.ERR_clear_error()
            throw .libraryFailure("CBC key")
        }
        if !padded { _ = libcrypto.EVP_CIPHER_CTX_set_padding(context, 0) }
        let target = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var updated: Int32 = 0
        var finished: Int32 = 0
        guard
            libcrypto.EVP_CipherUpdate(
                context, target, &updated, input.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(input.count))
                == 1
        else {
            libcrypto.ERR_clear_error()
            throw .libraryFailure("CBC update")
        }
        guard libcrypto.EVP_CipherFinal_ex(context, target.map { $0 + Int(updated) }, &finished) == 1 else {
            libcrypto.ERR_clear_error()
            // Only a decryption's final step fails on its input: the padding does not check out.
            if encrypting { throw .libraryFailure("CBC final") }
            throw .authenticationFailed
        }
        return Int(updated) + Int(finished)
    }
}
