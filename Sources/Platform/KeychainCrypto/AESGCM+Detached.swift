import COpenSSL
import Foundation
import KeychainBytes

extension AESGCM {
    /// AES-GCM with a key of 16 or 32 bytes, an IV of any length and the tag apart (16 bytes): the form
    /// other formats (Apple's ECIES) fix, as opposed to this keychain's own sealed boxes.
    public static func sealDetached(_ plaintext: Data, key: SecureBytes, iv: Data, aad: Data = Data()) throws
        -> (ciphertext: Data, tag: Data)
    {
        try run(encrypting: true, input: plaintext, key: key, iv: iv, aad: aad, tag: nil)
    }

    /// The plaintext, or `CryptoError.authenticationFailed` when the tag does not verify.
    public static func openDetached(_ ciphertext: Data, tag: Data, key: SecureBytes, iv: Data, aad: Data = Data())
        throws -> SecureBytes
    {
        var (plaintext, _) = try run(encrypting: false, input: ciphertext, key: key, iv: iv, aad: aad, tag: tag)
        defer { plaintext.resetBytes(in: 0..<plaintext.count) }
        return SecureBytes(copying: plaintext)
    }

    private static func run(encrypting: Bool, input: Data, key: SecureBytes, iv: Data, aad: Data, tag: Data?) throws
        -> (Data, Data)
    {
        guard key.count == 16 || key.count == 32 else {
            throw CryptoError.invalidKeySize(expected: 32, actual: key.count)
        }
        guard !iv.isEmpty, iv.count <= 64 else { throw CryptoError.libraryFailure("GCM IV length") }
        guard let cipher = EVP_CIPHER_fetch(nil, key.count == 16 ? "AES-128-GCM" : "AES-256-GCM", nil) else {
            throw CryptoError.libraryFailure("no AES-GCM")
        }
        defer { EVP_CIPHER_free(cipher) }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.libraryFailure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        let initialize = encrypting ? EVP_EncryptInit_ex2 : EVP_DecryptInit_ex2
        guard initialize(context, cipher, nil, nil, nil) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1
        else { throw CryptoError.libraryFailure("GCM init") }
        let keyed = key.withUnsafeBytes { keyBytes in
            iv.withUnsafeBytes { ivBytes in
                initialize(
                    context, nil, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    ivBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), nil)
            }
        }
        guard keyed == 1 else { throw CryptoError.libraryFailure("GCM key") }
        let update = encrypting ? EVP_EncryptUpdate : EVP_DecryptUpdate
        var written: Int32 = 0
        if !aad.isEmpty {
            let ok = aad.withUnsafeBytes {
                update(context, nil, &written, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count))
            }
            guard ok == 1 else { throw CryptoError.libraryFailure("GCM AAD") }
        }
        var output = Data(count: input.count)
        if !input.isEmpty {
            let ok = output.withUnsafeMutableBytes { out in
                input.withUnsafeBytes {
                    update(
                        context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &written,
                        $0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count))
                }
            }
            guard ok == 1 else { throw CryptoError.libraryFailure("GCM update") }
        }
        var scratch = [UInt8](repeating: 0, count: 16)
        var final: Int32 = 0
        if encrypting {
            guard EVP_EncryptFinal_ex(context, &scratch, &final) == 1 else {
                throw CryptoError.libraryFailure("GCM final")
            }
            var produced = Data(count: 16)
            let ok = produced.withUnsafeMutableBytes {
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, $0.baseAddress)
            }
            guard ok == 1 else { throw CryptoError.libraryFailure("GCM tag") }
            return (output, produced)
        }
        guard let tag, tag.count == 16 else { throw CryptoError.authenticationFailed }
        var tagBytes = [UInt8](tag)
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, &tagBytes) == 1 else {
            throw CryptoError.libraryFailure("GCM tag")
        }
        guard EVP_DecryptFinal_ex(context, &scratch, &final) == 1 else {
            output.resetBytes(in: 0..<output.count)
            throw CryptoError.authenticationFailed
        }
        return (output, Data())
    }
}
