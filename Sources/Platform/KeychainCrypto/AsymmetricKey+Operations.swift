import COpenSSL
import FoundationEssentials
import KeychainBytes

extension Hash {
    /// OpenSSL's name of the digest.
    var name: String {
        switch self {
        case .sha1: "SHA1"
        case .sha224: "SHA224"
        case .sha256: "SHA256"
        case .sha384: "SHA384"
        case .sha512: "SHA512"
        }
    }
}

public enum SignatureScheme: Sendable, Equatable {
    /// ECDSA with a DER `Ecdsa-Sig-Value` (ANSI X9.62).
    case ecdsa(Hash, SignatureInput)
    /// ECDSA over a digest of any length (taken as it is, or cut to the curve's size), DER signature:
    /// Apple's `ecdsaSignatureDigestX962`.
    case ecdsaDigest
    /// ECDSA over a digest of any length, the signature as r ‖ s, each as long as the curve's
    /// coordinates (RFC 4754): Apple's `ecdsaSignatureRFC4754`.
    case ecdsaRawRS
    /// RSASSA-PKCS1-v1_5; no hash with `.digest`: the input is signed as it is (Apple's "Raw").
    case rsaPKCS1v15(Hash?, SignatureInput)
    /// RSASSA-PSS with MGF1 of the same hash and a salt of `saltLength` bytes (Apple's names give it:
    /// the digest's length, but 24 with SHA-224).
    case rsaPSS(Hash, SignatureInput, saltLength: Int)
    /// The RSA private-key operation on an input of the key's size, with no padding (Apple's
    /// `rsaSignatureRaw`; what it signs is the caller's to make safe).
    case rsaRaw

    var isRSA: Bool {
        switch self {
        case .ecdsa, .ecdsaDigest, .ecdsaRawRS: false
        case .rsaPKCS1v15, .rsaPSS, .rsaRaw: true
        }
    }
}

public enum EncryptionScheme: Sendable, Equatable {
    /// RSAES-PKCS1-v1_5.
    case rsaPKCS1
    /// RSAES-OAEP with MGF1 of the same hash and no label.
    case rsaOAEP(Hash)
    /// The RSA public-key operation on an input of the key's size, with no padding (Apple's
    /// `rsaEncryptionRaw`).
    case rsaRaw
}

extension AsymmetricKey {
    // MARK: Signatures

    public func sign(_ input: Data, _ scheme: SignatureScheme) throws(Failure) -> Data {
        guard isPrivate else { throw .unsupported("a public key does not sign") }
        try check(scheme, input: input)
        switch Self.input(of: scheme) {
        case .message:
            return try withDigestContext(scheme, signing: true) { context throws(Failure) in
                try Self.twoPass { buffer, length in
                    input.withUnsafeBytes { raw in
                        libcrypto.EVP_DigestSign(
                            context, buffer, &length, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
                    }
                }
            }
        case .digest:
            let signature = try withKeyContext(scheme, signing: true) { context throws(Failure) in
                try Self.twoPass { buffer, length in
                    input.withUnsafeBytes { raw in
                        libcrypto.EVP_PKEY_sign(
                            context, buffer, &length, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
                    }
                }
            }
            guard scheme == .ecdsaRawRS, case .ec(let curve) = kind else { return signature }
            guard let raw = ECDSASignatureEncoding.rawRS(fromDER: signature, coordinateSize: curve.coordinateSize)
            else { throw .library("ECDSA signature encoding") }
            return raw
        }
    }

    /// Whether `signature` is a valid signature of `input` under this key (a private key verifies with
    /// its public half).
    public func verify(_ given: Data, of input: Data, _ scheme: SignatureScheme) throws(Failure) -> Bool {
        try check(scheme, input: input)
        var signature = given
        if scheme == .ecdsaRawRS, case .ec(let curve) = kind {
            guard let der = ECDSASignatureEncoding.der(fromRawRS: given, coordinateSize: curve.coordinateSize) else {
                return false
            }
            signature = der
        }
        let result: Int32
        switch Self.input(of: scheme) {
        case .message:
            result = try withDigestContext(scheme, signing: false) { context throws(Failure) in
                signature.withUnsafeBytes { signatureBytes in
                    input.withUnsafeBytes { raw in
                        libcrypto.EVP_DigestVerify(
                            context, signatureBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                            signatureBytes.count, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
                    }
                }
            }
        case .digest:
            result = try withKeyContext(scheme, signing: false) { context throws(Failure) in
                signature.withUnsafeBytes { signatureBytes in
                    input.withUnsafeBytes { raw in
                        libcrypto.EVP_PKEY_verify(
                            context, signatureBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                            signatureBytes.count, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
                    }
                }
            }
        }
        libcrypto.ERR_clear_error()
        return result == 1
    }

    /// Whether the scheme is for this kind of key.
    public func supports(_ scheme: SignatureScheme) -> Bool {
        switch kind {
        case .rsa: scheme.isRSA
        case .ec: !scheme.isRSA
        }
    }

    private func check(_ scheme: SignatureScheme, input: Data) throws(Failure) {
        guard supports(scheme) else { throw .unsupported("the algorithm is not for this key's type") }
        switch scheme {
        case .ecdsa(let hash, .digest), .rsaPKCS1v15(let hash?, .digest), .rsaPSS(let hash, .digest, _):
            guard input.count == hash.length else {
                throw .invalidKey("a \(hash.name) digest is \(hash.length) bytes, not \(input.count)")
            }
        case .rsaPKCS1v15(nil, .digest):
            guard input.count <= blockSize - 11 else { throw .invalidKey("the input is too long for the key") }
        case .rsaPKCS1v15(nil, .message):
            throw .unsupported("raw PKCS#1 v1.5 signs a digest")
        case .ecdsaDigest, .ecdsaRawRS:
            guard !input.isEmpty else { throw .invalidKey("an empty digest") }
        case .rsaRaw:
            guard input.count == blockSize, isBelowModulus(input) else {
                throw .invalidKey("a raw RSA input is the key's size and below its modulus")
            }
        default:
            break
        }
    }

    private static func input(of scheme: SignatureScheme) -> SignatureInput {
        switch scheme {
        case .ecdsa(_, let input), .rsaPKCS1v15(_, let input), .rsaPSS(_, let input, _): input
        case .ecdsaDigest, .ecdsaRawRS, .rsaRaw: .digest
        }
    }

    private static func hash(of scheme: SignatureScheme) -> Hash? {
        switch scheme {
        case .ecdsa(let hash, _), .rsaPSS(let hash, _, _): hash
        case .rsaPKCS1v15(let hash, _): hash
        case .ecdsaDigest, .ecdsaRawRS, .rsaRaw: nil
        }
    }

    private func withDigestContext<T>(
        _ scheme: SignatureScheme, signing: Bool, _ body: (OpaquePointer) throws(Failure) -> T
    ) throws(Failure) -> T {
        guard let context = libcrypto.EVP_MD_CTX_new() else { throw .library("digest context") }
        defer { libcrypto.EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        let name = Self.hash(of: scheme)?.name
        let ok =
            signing
            ? libcrypto.EVP_DigestSignInit_ex(context, &keyContext, name, nil, nil, key, nil)
            : libcrypto.EVP_DigestVerifyInit_ex(context, &keyContext, name, nil, nil, key, nil)
        guard ok == 1, let keyContext else { throw .library("signature init") }
        try Self.configure(keyContext, scheme)
        return try body(context)
    }

    private func withKeyContext<T>(
        _ scheme: SignatureScheme, signing: Bool, _ body: (OpaquePointer) throws(Failure) -> T
    )
        throws(Failure) -> T
    {
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw .library("key context") }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        guard (signing ? libcrypto.EVP_PKEY_sign_init(context) : libcrypto.EVP_PKEY_verify_init(context)) == 1 else {
            throw .library("signature init")
        }
        try Self.configure(context, scheme)
        if let hash = Self.hash(of: scheme) {
            guard let digest = libcrypto.EVP_MD_fetch(nil, hash.name, nil) else { throw .library("no \(hash.name)") }
            defer { libcrypto.EVP_MD_free(digest) }
            guard libcrypto.EVP_PKEY_CTX_set_signature_md(context, digest) == 1 else {
                throw .library("signature digest")
            }
        }
        return try body(context)
    }

    private static func configure(_ context: OpaquePointer, _ scheme: SignatureScheme) throws(Failure) {
        switch scheme {
        case .ecdsa, .ecdsaDigest, .ecdsaRawRS: return
        case .rsaRaw:
            guard libcrypto.EVP_PKEY_CTX_set_rsa_padding(context, RSA_NO_PADDING) == 1 else {
                throw .library("padding")
            }
        case .rsaPKCS1v15:
            guard libcrypto.EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1 else {
                throw .library("padding")
            }
        case .rsaPSS(let hash, _, let saltLength):
            guard libcrypto.EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PSS_PADDING) == 1,
                libcrypto.EVP_PKEY_CTX_set_rsa_pss_saltlen(context, Int32(saltLength)) == 1,
                libcrypto.EVP_PKEY_CTX_set_rsa_mgf1_md_name(context, hash.name, nil) == 1
            else { throw .library("PSS parameters") }
        }
    }

    // MARK: Encryption

    public func encrypt(_ plaintext: Data, _ scheme: EncryptionScheme) throws(Failure) -> Data {
        guard case .rsa = kind else { throw .unsupported("the algorithm is not for this key's type") }
        let overhead: Int
        switch scheme {
        case .rsaPKCS1: overhead = 11
        case .rsaOAEP(let hash): overhead = 2 * hash.length + 2
        case .rsaRaw:
            guard plaintext.count == blockSize, isBelowModulus(plaintext) else {
                throw .invalidKey("a raw RSA input is the key's size and below its modulus")
            }
            overhead = 0
        }
        guard plaintext.count <= blockSize - overhead else { throw .invalidKey("the input is too long for the key") }
        return try withCipherContext(scheme, encrypting: true) { context throws(Failure) in
            try Self.twoPass { buffer, length in
                plaintext.withUnsafeBytes { raw in
                    libcrypto.EVP_PKEY_encrypt(
                        context, buffer, &length, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
                }
            }
        }
    }

    /// The plaintext in wiped memory; a ciphertext that does not decrypt throws `.invalidKey`.
    public func decrypt(_ ciphertext: Data, _ scheme: EncryptionScheme) throws(Failure) -> SecureBytes {
        guard case .rsa = kind else { throw .unsupported("the algorithm is not for this key's type") }
        guard isPrivate else { throw .unsupported("a public key does not decrypt") }
        guard ciphertext.count == blockSize else { throw .invalidKey("the ciphertext is not the key's size") }
        return try withCipherContext(scheme, encrypting: false) { context throws(Failure) in
            var length = 0
            let sized = ciphertext.withUnsafeBytes { raw in
                libcrypto.EVP_PKEY_decrypt(
                    context, nil, &length, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
            }
            guard sized == 1 else { throw .library("decrypt size") }
            var buffer = [UInt8](repeating: 0, count: length)
            defer { SecureMemory.wipe(&buffer) }
            let ok = ciphertext.withUnsafeBytes { raw in
                libcrypto.EVP_PKEY_decrypt(
                    context, &buffer, &length, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
            }
            libcrypto.ERR_clear_error()
            guard ok == 1 else { throw .invalidKey("the ciphertext does not decrypt with this key") }
            return SecureBytes(copying: buffer[..<length])
        }
    }

    private func withCipherContext<T>(
        _ scheme: EncryptionScheme, encrypting: Bool, _ body: (OpaquePointer) throws(Failure) -> T
    ) throws(Failure) -> T {
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw .library("key context") }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        guard (encrypting ? libcrypto.EVP_PKEY_encrypt_init(context) : libcrypto.EVP_PKEY_decrypt_init(context)) == 1
        else {
            throw .library("cipher init")
        }
        switch scheme {
        case .rsaPKCS1:
            guard libcrypto.EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1 else {
                throw .library("padding")
            }
        case .rsaRaw:
            guard libcrypto.EVP_PKEY_CTX_set_rsa_padding(context, RSA_NO_PADDING) == 1 else {
                throw .library("padding")
            }
        case .rsaOAEP(let hash):
            guard libcrypto.EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_OAEP_PADDING) == 1,
                libcrypto.EVP_PKEY_CTX_set_rsa_oaep_md_name(context, hash.name, nil) == 1,
                libcrypto.EVP_PKEY_CTX_set_rsa_mgf1_md_name(context, hash.name, nil) == 1
            else { throw .library("OAEP parameters") }
        }
        return try body(context)
    }

    /// OpenSSL's size-then-fill calling convention.
    private static func twoPass(_ call: (UnsafeMutablePointer<UInt8>?, inout Int) -> Int32) throws(Failure) -> Data {
        var length = 0
        guard call(nil, &length) == 1, length > 0 else {
            libcrypto.ERR_clear_error()
            throw .library("output size")
        }
        var output = Data(count: length)
        let ok = output.withUnsafeMutableBytes { call($0.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) }
        libcrypto.ERR_clear_error()
        guard ok == 1 else { throw .library("operation") }
        return output.prefix(length)
    }
}
