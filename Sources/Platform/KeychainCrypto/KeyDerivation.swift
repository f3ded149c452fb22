import COpenSSL
import Foundation
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
        guard let kdf = EVP_KDF_fetch(nil, "SCRYPT", nil) else { throw CryptoError.libraryFailure("EVP_KDF_fetch") }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw CryptoError.libraryFailure("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(context) }
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
                        OSSL_PARAM_construct_octet_string(
                            name("pass"), UnsafeMutableRawPointer(mutating: passwordBytes.baseAddress),
                            passwordBytes.count),
                        OSSL_PARAM_construct_octet_string(
                            name("salt"), UnsafeMutableRawPointer(mutating: saltBytes.baseAddress), saltBytes.count),
                        OSSL_PARAM_construct_uint64(name("n"), wide),
                        OSSL_PARAM_construct_uint32(name("r"), narrow),
                        OSSL_PARAM_construct_uint32(name("p"), narrow + 1),
                        OSSL_PARAM_construct_uint64(name("maxmem_bytes"), wide + 1),
                        OSSL_PARAM_construct_end(),
                    ]
                    return EVP_KDF_derive(
                        context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), length, &parameters)
                }
            }
            guard ok == 1 else { throw CryptoError.libraryFailure("scrypt derivation") }
        }
    }

    /// The ANSI X9.63 KDF over `secret` with `sharedInfo`, through OpenSSL's `EVP_KDF` ("X963KDF").
    public static func x963(secret: SecureBytes, sharedInfo: Data, hash: Hash, length: Int) throws -> SecureBytes {
        guard (1...(1 << 20)).contains(length) else { throw CryptoError.libraryFailure("X9.63 KDF length") }
        guard let kdf = EVP_KDF_fetch(nil, "X963KDF", nil) else { throw CryptoError.libraryFailure("no X963KDF") }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw CryptoError.libraryFailure("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(context) }
        return try hash.name.withCString { digest in
            try SecureBytes(count: length) { out in
                let ok = secret.withUnsafeBytes { secretBytes in
                    sharedInfo.withUnsafeBytes { info in
                        var parameters = [
                            OSSL_PARAM_construct_utf8_string(
                                name("digest"), UnsafeMutablePointer(mutating: digest), 0),
                            OSSL_PARAM_construct_octet_string(
                                name("key"), UnsafeMutableRawPointer(mutating: secretBytes.baseAddress),
                                secretBytes.count),
                            OSSL_PARAM_construct_octet_string(
                                name("info"), UnsafeMutableRawPointer(mutating: info.baseAddress), info.count),
                            OSSL_PARAM_construct_end(),
                        ]
                        return EVP_KDF_derive(
                            context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), length, &parameters)
                    }
                }
                guard ok == 1 else { throw CryptoError.libraryFailure("X9.63 KDF") }
            }
        }
    }

    private static func name(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// PBKDF2-HMAC-SHA256 of `password` into `length` bytes.
    public static func pbkdf2(password: SecureBytes, salt: Data, iterations: Int, length: Int = 32)
        throws -> SecureBytes
    {
        try SecureBytes(count: length) { (out: UnsafeMutableRawBufferPointer) throws in
            let ok = password.withUnsafeBytes { passwordBytes in
                salt.withUnsafeBytes { saltBytes in
                    PKCS5_PBKDF2_HMAC(
                        passwordBytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(passwordBytes.count),
                        saltBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(saltBytes.count),
                        Int32(clamping: iterations), EVP_sha256(), Int32(length),
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self))
                }
            }
            guard ok == 1 else { throw CryptoError.libraryFailure("PKCS5_PBKDF2_HMAC") }
        }
    }

    /// HKDF-SHA256 (RFC 5869) with an empty salt: `info` separates the purposes of the derived keys.
    /// Every intermediate key (the PRK, each block) stays in wiped memory.
    public static func hkdf(key: SecureBytes, info: String, length: Int = 32) throws -> SecureBytes {
        guard length <= 255 * 32 else { throw CryptoError.libraryFailure("HKDF output longer than 8160 bytes") }
        // Extract with the all-zero salt, then expand.
        let extractor = try HMACKey(key: SecureBytes(count: 32) { _ in }, pinned: false)
        let pseudoRandomKey = try SecureBytes(count: 32) { out in
            try key.withUnsafeBytes { try extractor.authenticationCode([$0], into: out) }
        }
        let expander = try HMACKey(key: pseudoRandomKey, pinned: false)
        let infoBytes = Array(info.utf8)
        return try SecureBytes(count: length) { (out: UnsafeMutableRawBufferPointer) throws in
            var block = [UInt8](repeating: 0, count: 32)
            defer { SecureMemory.wipe(&block) }
            var offset = 0
            var counter: UInt8 = 1
            while offset < length {
                // T(n) = HMAC(PRK, T(n-1) ‖ info ‖ n), with T(0) empty.
                let previousCount = counter == 1 ? 0 : 32
                try block.withUnsafeMutableBytes { blockBytes in
                    try infoBytes.withUnsafeBytes { infoBuffer in
                        try withUnsafeBytes(of: counter) { counterBytes in
                            let previous = UnsafeRawBufferPointer(rebasing: blockBytes[0..<previousCount])
                            try expander.authenticationCode([previous, infoBuffer, counterBytes], into: blockBytes)
                        }
                    }
                }
                let take = Swift.min(32, length - offset)
                for index in 0..<take { out[offset + index] = block[index] }
                offset += take
                counter &+= 1
            }
        }
    }
}
