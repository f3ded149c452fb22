import COpenSSL
import FoundationEssentials
import KeychainBytes

/// Key derivation: scrypt for passcodes (the deliberately slow and memory-hungry step; PBKDF2 for keybags
/// made before scrypt), HKDF for splitting one key into several independent ones (the cheap step), and
/// ANSI X9.63 for the key agreements and ECIES of `SecKey`.
public enum KeyDerivation {
    /// scrypt (RFC 7914) through OpenSSL's `EVP_KDF`, with N = 2^`logN`. It needs 128·r·(N + p + 2)
    /// bytes of memory, so guessing in parallel costs memory as well as time.
    public static func scrypt(
        password: SecureBytes, salt: Data, logN: UInt8, r: UInt32, p: UInt32, length: Int = 32
    ) throws -> SecureBytes {
        guard (1...30).contains(logN), (1...1024).contains(r), (1...1024).contains(p), (1...1024).contains(length)
        else { throw CryptoError.libraryFailure("scrypt parameters out of range") }
        guard let kdf = libcrypto.EVP_KDF_fetch(nil, "SCRYPT", nil) else {
            throw CryptoError.libraryFailure("EVP_KDF_fetch")
        }
        defer { libcrypto.EVP_KDF_free(kdf) }
        guard let context = libcrypto.EVP_KDF_CTX_new(kdf) else { throw CryptoError.libraryFailure("EVP_KDF_CTX_new") }
        defer { libcrypto.EVP_KDF_CTX_free(context) }
        let n = UInt64(1) << UInt64(logN)
        // OpenSSL refuses to use more than this; what scrypt needs, plus room for its bookkeeping.
        let maximumMemory = 128 * UInt64(r) * (n + UInt64(p) + 2) + (1 << 20)
        // OSSL_PARAM keeps pointers to the numbers and reads them during the derivation: storage that
        // lives until then, not the addresses `&` gives for one call.
        let wide = UnsafeMutablePointer<UInt64>.allocate(capacity: 2)
        let narrow = UnsafeMutablePointer<UInt32>.allocate(capacity: 2)
        defer {
            wide.deallocate()
            narrow.deallocate()
        }
        wide.initialize(to: n)
        (wide + 1).initialize(to: maximumMemory)
        narrow.initialize(to: r)
        (narrow + 1).initialize(to: p)
        return try SecureBytes(count: length) { (out: UnsafeMutableRawBufferPointer) throws in
            let ok = password.withUnsafeBytes { passwordBytes in
                salt.withUnsafeBytes { saltBytes in
                    // OSSL_PARAM keeps the name pointers, so they must outlive the call: static strings.
                    var parameters = [
                        libcrypto.OSSL_PARAM_construct_octet_string(
                            OpenSSLParameters.name("pass"),
                            UnsafeMutableRawPointer(mutating: passwordBytes.baseAddress),
                            passwordBytes.count),
                        libcrypto.OSSL_PARAM_construct_octet_string(
                            OpenSSLParameters.name("salt"), UnsafeMutableRawPointer(mutating: saltBytes.baseAddress),
                            saltBytes.count),
                        libcrypto.OSSL_PARAM_construct_uint64(OpenSSLParameters.name("n"), wide),
                        libcrypto.OSSL_PARAM_construct_uint32(OpenSSLParameters.name("r"), narrow),
                        libcrypto.OSSL_PARAM_construct_uint32(OpenSSLParameters.name("p"), narrow + 1),
                        libcrypto.OSSL_PARAM_construct_uint64(OpenSSLParameters.name("maxmem_bytes"), wide + 1),
                        libcrypto.OSSL_PARAM_construct_end(),
                    ]
                    return libcrypto.EVP_KDF_derive(
                        context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), length, &parameters)
                }
            }
            guard ok == 1 else { throw CryptoError.libraryFailure("scrypt derivation") }
        }
    }

    /// The ANSI X9.63 KDF over `secret` with `sharedInfo`, through OpenSSL's `EVP_KDF` ("X963KDF").
    public static func x963(secret: SecureBytes, sharedInfo: Data, hash: Hash, length: Int) throws -> SecureBytes {
        guard (1...(1 << 20)).contains(length) else { throw CryptoError.libraryFailure("X9.63 KDF length") }
        guard let kdf = libcrypto.EVP_KDF_fetch(nil, "X963KDF", nil) else {
            throw CryptoError.libraryFailure("no X963KDF")
        }
        defer { libcrypto.EVP_KDF_free(kdf) }
        guard let context = libcrypto.EVP_KDF_CTX_new(kdf) else { throw CryptoError.libraryFailure("EVP_KDF_CTX_new") }
        defer { libcrypto.EVP_KDF_CTX_free(context) }
        return try hash.name.withCString { digest in
            try SecureBytes(count: length) { out in
                let ok = secret.withUnsafeBytes { secretBytes in
                    sharedInfo.withUnsafeBytes { info in
                        var parameters = [
                            libcrypto.OSSL_PARAM_construct_utf8_string(
                                OpenSSLParameters.name("digest"), UnsafeMutablePointer(mutating: digest), 0),
                            libcrypto.OSSL_PARAM_construct_octet_string(
                                OpenSSLParameters.name("key"),
                                UnsafeMutableRawPointer(mutating: secretBytes.baseAddress),
                                secretBytes.count),
                            libcrypto.OSSL_PARAM_construct_octet_string(
                                OpenSSLParameters.name("info"), UnsafeMutableRawPointer(mutating: info.baseAddress),
                                info.count),
                            libcrypto.OSSL_PARAM_construct_end(),
                        ]
                        return libcrypto.EVP_KDF_derive(
                            context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), length, &parameters)
                    }
                }
                guard ok == 1 else { throw CryptoError.libraryFailure("X9.63 KDF") }
            }
        }
    }

    /// PBKDF2-HMAC-SHA256 of `password` into `length` bytes.
    public static func pbkdf2(password: SecureBytes, salt: Data, iterations: Int, length: Int = 32)
        throws -> SecureBytes
    {
        try SecureBytes(count: length) { (out: UnsafeMutableRawBufferPointer) throws in
            let ok = password.withUnsafeBytes { passwordBytes in
                salt.withUnsafeBytes { saltBytes in
                    libcrypto.PKCS5_PBKDF2_HMAC(
                        passwordBytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(passwordBytes.count),
                        saltBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(saltBytes.count),
                        Int32(clamping: iterations), libcrypto.EVP_sha256(), Int32(length),
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self))
                }
            }
            guard ok == 1 else { throw CryptoError.libraryFailure("PKCS5_PBKDF2_HMAC") }
        }
    }

    /// HKDF-SHA256 (RFC 5869) with an empty salt: `info` separates the purposes of the derived keys.
    public static func hkdf(key: SecureBytes, info: String, length: Int = 32) throws -> SecureBytes {
        // No salt is a salt of the hash's length in zeros (RFC 5869 §2.2), given as such so that the
        // extraction is the same whatever OpenSSL makes of a missing one.
        try hkdf(key: key, salt: Data(count: 32), info: Data(info.utf8), length: length)
    }

    // Fetched once: a fetch is a locked search of OpenSSL's algorithm store, which no derivation needs to repeat.
    nonisolated(unsafe) private static let hkdfAlgorithm: OpaquePointer? = libcrypto.EVP_KDF_fetch(nil, "HKDF", nil)

    /// HKDF-SHA256, extract then expand, through OpenSSL's `EVP_KDF`; the output in wiped memory (the
    /// intermediate key stays inside OpenSSL, which wipes it).
    static func hkdf(key: SecureBytes, salt: Data, info: Data, length: Int) throws -> SecureBytes {
        guard (0...(255 * 32)).contains(length) else {
            throw CryptoError.libraryFailure("HKDF output longer than 8160 bytes")
        }
        // OpenSSL takes no more info than this; refused here with a reason rather than as a failed derivation.
        guard info.count <= 32 * 1024 else { throw CryptoError.libraryFailure("HKDF info longer than 32 KiB") }
        // OpenSSL refuses to derive nothing; an empty output needs no derivation.
        guard length > 0 else { return SecureBytes(copying: []) }
        guard let algorithm = hkdfAlgorithm, let context = libcrypto.EVP_KDF_CTX_new(algorithm) else {
            libcrypto.ERR_clear_error()
            throw CryptoError.libraryFailure("no HKDF")
        }
        defer { libcrypto.EVP_KDF_CTX_free(context) }
        return try SecureBytes(count: length) { out in
            let ok = key.withUnsafeBytes { keyBytes in
                salt.withUnsafeBytes { saltBytes in
                    info.withUnsafeBytes { infoBytes in
                        var parameters = [
                            OpenSSLParameters.utf8("digest", "SHA256"),
                            OpenSSLParameters.octets("key", keyBytes),
                            OpenSSLParameters.octets("salt", saltBytes),
                            OpenSSLParameters.octets("info", infoBytes),
                            libcrypto.OSSL_PARAM_construct_end(),
                        ]
                        return libcrypto.EVP_KDF_derive(
                            context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), length, &parameters)
                    }
                }
            }
            guard ok == 1 else {
                libcrypto.ERR_clear_error()
                throw CryptoError.libraryFailure("HKDF derivation")
            }
        }
    }
}
