// The benchmark's floor for an embedded lookup's start: the static Swift floor, plus what OpenSSL 3
// costs before the first decryption can begin (loading libcrypto, and fetching the algorithms a
// lookup uses from the default provider, whose first fetch builds the provider's name tables). The
// embedded `security` command cannot start faster than this; what it takes beyond is its own.
import COpenSSL

#if canImport(Glibc)
    import Glibc
#endif

let options =
    UInt64(OPENSSL_INIT_NO_LOAD_CONFIG) | UInt64(OPENSSL_INIT_NO_ADD_ALL_CIPHERS)
    | UInt64(OPENSSL_INIT_NO_ADD_ALL_DIGESTS)
guard OPENSSL_init_crypto(options, nil) == 1, EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) != nil,
    EVP_MAC_fetch(nil, "HMAC", nil) != nil, EVP_KDF_fetch(nil, "HKDF", nil) != nil,
    EVP_MD_fetch(nil, "SHA256", nil) != nil
else {
    exit(1)
}
print("floor")
