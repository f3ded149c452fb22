import COpenSSL
import FoundationEssentials
import KeychainBytes

extension AESGCM {
    /// AES-GCM with a key of 16 or 32 bytes, an IV of any length and the tag apart (16 bytes): the form
    /// other formats (Apple's ECIES) fix, as opposed to this keychain's own sealed boxes.
    public static func sealDetached(_ plaintext: Data, key: SecureBytes, iv: Data, aad: Data = Data()) throws
        -> (ciphertext: Data, tag: Data)
    {
        let cipher = try detachedCipher(key)
        var ciphertext = Data(count: plaintext.count)
        var tag = Data(count: AESGCMContext.tagSize)
        try ciphertext.withUnsafeMutableBytes { out in
            try tag.withUnsafeMutableBytes { tagOut in
                try key.withUnsafeBytes { keyBytes in
                    try iv.withUnsafeBytes { ivBytes in
                        try aad.withUnsafeBytes { aadBytes in
                            try plaintext.withUnsafeBytes { input in
                                try AESGCMContext.seal(
                                    cipher, key: keyBytes, iv: ivBytes, aad: aadBytes, plaintext: input, into: out,
                                    tag: tagOut)
                            }
                        }
                    }
                }
            }
        }
        return (ciphertext, tag)
    }

    /// The plaintext, or `CryptoError.authenticationFailed` when the tag does not verify.
    public static func openDetached(_ ciphertext: Data, tag: Data, key: SecureBytes, iv: Data, aad: Data = Data())
        throws -> SecureBytes
    {
        let cipher = try detachedCipher(key)
        return try SecureBytes(count: ciphertext.count) { out in
            try key.withUnsafeBytes { keyBytes in
                try iv.withUnsafeBytes { ivBytes in
                    try aad.withUnsafeBytes { aadBytes in
                        try ciphertext.withUnsafeBytes { input in
                            try tag.withUnsafeBytes { tagBytes in
                                try AESGCMContext.open(
                                    cipher, key: keyBytes, iv: ivBytes, aad: aadBytes, ciphertext: input, tag: tagBytes,
                                    into: out)
                            }
                        }
                    }
                }
            }
        }
    }

    // Fetched once, as the sealed boxes' AES-256-GCM is.
    nonisolated(unsafe) private static let aes128: OpaquePointer? = libcrypto.EVP_CIPHER_fetch(nil, "AES-128-GCM", nil)

    private static func detachedCipher(_ key: SecureBytes) throws -> OpaquePointer? {
        switch key.count {
        case 16: aes128
        case 32: cipher
        default: throw CryptoError.invalidKeySize(expected: 32, actual: key.count)
        }
    }
}
