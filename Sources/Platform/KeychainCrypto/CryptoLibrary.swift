import COpenSSL

/// Process-wide start-up of the crypto library.
public enum CryptoLibrary {
    /// Starts OpenSSL without reading the system's `openssl.cnf` and without registering every legacy
    /// algorithm name, which together cost about half a millisecond on each process start. The keychain
    /// needs neither: it fetches its few algorithms (AES-256-GCM, SHA-256, HMAC, PBKDF2) from the default
    /// provider by name.
    ///
    /// OpenSSL decides this once per process, for everything in it; so only a program that owns its
    /// `main` (the `security` command, the daemon) may call this, before any other crypto. A library
    /// embedded in someone else's program leaves the host's OpenSSL set-up alone.
    /// Returns false if OpenSSL could not start.
    @discardableResult
    public static func startWithoutSystemConfiguration() -> Bool {
        let options =
            UInt64(OPENSSL_INIT_NO_LOAD_CONFIG) | UInt64(OPENSSL_INIT_NO_ADD_ALL_CIPHERS)
            | UInt64(OPENSSL_INIT_NO_ADD_ALL_DIGESTS)
        return libcrypto.OPENSSL_init_crypto(options, nil) == 1
    }
}
