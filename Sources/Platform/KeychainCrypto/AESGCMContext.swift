import COpenSSL
import KeychainBytes

/// One AES-GCM encryption or decryption in the `EVP_CIPHER_CTX` it owns: the one call sequence the
/// keychain's sealed boxes and the detached form of other formats both go through.
///
/// Not copyable, so the context is freed exactly once, when the operation ends whichever way it ends
/// (a throw included); and a struct, since a seal is on every item write and a class would be one
/// more allocation for it.
struct AESGCMContext: ~Copyable {
    static let tagSize = 16

    private let context: OpaquePointer

    /// Encrypts `plaintext` into `ciphertext` (as long), authenticating `aad` with it, and writes the
    /// tag into `tag` (16 bytes).
    static func seal(
        _ cipher: OpaquePointer?, key: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer, into ciphertext: UnsafeMutableRawBufferPointer,
        tag: UnsafeMutableRawBufferPointer
    ) throws {
        guard ciphertext.count == plaintext.count, tag.count == tagSize, let tagBase = tag.baseAddress else {
            throw CryptoError.libraryFailure("GCM output buffer size")
        }
        let operation = try keyed(cipher, encrypting: true, key: key, iv: iv)
        try operation.update(aad, into: nil)
        try operation.update(plaintext, into: ciphertext.baseAddress)
        // GCM writes nothing at the end (its block is a byte), but the call wants somewhere to write.
        var final: Int32 = 0
        guard libcrypto.EVP_CipherFinal_ex(operation.context, tagBase.assumingMemoryBound(to: UInt8.self), &final) == 1,
            libcrypto.EVP_CIPHER_CTX_ctrl(operation.context, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), tagBase) == 1
        else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("GCM tag")
        }
    }

    /// Decrypts `ciphertext` into `plaintext` (as long) and checks `tag` over it and `aad`; throws
    /// `CryptoError.authenticationFailed` when the tag does not verify (a tag of another length never
    /// does). `plaintext` is wiped whenever this throws, so no unauthenticated byte is left in it.
    static func open(
        _ cipher: OpaquePointer?, key: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
        into plaintext: UnsafeMutableRawBufferPointer
    ) throws {
        guard plaintext.count == ciphertext.count else { throw CryptoError.libraryFailure("GCM output buffer size") }
        do {
            let operation = try keyed(cipher, encrypting: false, key: key, iv: iv)
            try operation.decrypt(aad: aad, ciphertext: ciphertext, tag: tag, into: plaintext)
        } catch {
            SecureMemory.wipe(plaintext)
            throw error
        }
    }

    private func decrypt(
        aad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
        into plaintext: UnsafeMutableRawBufferPointer
    ) throws {
        guard tag.count == Self.tagSize, let tagBase = tag.baseAddress else { throw CryptoError.authenticationFailed }
        try update(aad, into: nil)
        try update(ciphertext, into: plaintext.baseAddress)
        // The control takes a mutable pointer for every use; setting the tag only reads it.
        guard
            libcrypto.EVP_CIPHER_CTX_ctrl(
                context, EVP_CTRL_GCM_SET_TAG, Int32(Self.tagSize), UnsafeMutableRawPointer(mutating: tagBase)) == 1
        else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("GCM tag")
        }
        var scratch = (UInt64(0), UInt64(0))
        var final: Int32 = 0
        let verified = withUnsafeMutableBytes(of: &scratch) {
            libcrypto.EVP_CipherFinal_ex(context, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), &final)
        }
        guard verified == 1 else {
            libcrypto.ERR_clear_error()
            throw CryptoError.authenticationFailed
        }
    }

    /// A context keyed with `key` (as long as `cipher`'s keys) and `iv` (1 to 64 bytes).
    private static func keyed(
        _ cipher: OpaquePointer?, encrypting: Bool, key: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer
    ) throws -> AESGCMContext {
        guard let context = libcrypto.EVP_CIPHER_CTX_new() else {
            throw CryptoError.libraryFailure("EVP_CIPHER_CTX_new")
        }
        let operation = AESGCMContext(adopting: context)
        // A failure to key it ends the operation, which frees the context.
        try operation.start(cipher, encrypting: encrypting, key: key, iv: iv)
        return operation
    }

    private init(adopting context: OpaquePointer) { self.context = context }

    private func start(
        _ cipher: OpaquePointer?, encrypting: Bool, key: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer
    ) throws {
        guard let cipher else { throw CryptoError.libraryFailure("no AES-GCM") }
        let keySize = Int(libcrypto.EVP_CIPHER_get_key_length(cipher))
        guard key.count == keySize, let keyBase = key.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw CryptoError.invalidKeySize(expected: keySize, actual: key.count)
        }
        guard (1...64).contains(iv.count), let ivBase = iv.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw CryptoError.libraryFailure("GCM IV length")
        }
        let direction: Int32 = encrypting ? 1 : 0
        var keyedCipher: OpaquePointer? = cipher
        // Keying copies as many IV bytes as the context's IV length then is, so another length than
        // the cipher's 96-bit default has to be set first, in a call of its own.
        if iv.count != Int(libcrypto.EVP_CIPHER_get_iv_length(cipher)) {
            guard libcrypto.EVP_CipherInit_ex2(context, cipher, nil, nil, direction, nil) == 1,
                libcrypto.EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1
            else {
                libcrypto.ERR_clear_error()
                throw CryptoError.libraryFailure("GCM IV length")
            }
            keyedCipher = nil
        }
        guard libcrypto.EVP_CipherInit_ex2(context, keyedCipher, keyBase, ivBase, direction, nil) == 1 else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("GCM key")
        }
    }

    deinit { libcrypto.EVP_CIPHER_CTX_free(context) }

    /// Feeds `input` through, as associated data when `output` is nil; in pieces, since OpenSSL counts
    /// a piece in an `int`.
    private func update(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawPointer?) throws {
        guard let base = input.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        var offset = 0
        while offset < input.count {
            let count = Swift.min(input.count - offset, 1 << 30)
            var written: Int32 = 0
            let target = output.map { ($0 + offset).assumingMemoryBound(to: UInt8.self) }
            guard libcrypto.EVP_CipherUpdate(context, target, &written, base + offset, Int32(count)) == 1,
                output == nil || Int(written) == count
            else {
                libcrypto.ERR_clear_error()
                throw CryptoError.libraryFailure(output == nil ? "GCM AAD" : "GCM update")
            }
            offset += count
        }
    }
}
