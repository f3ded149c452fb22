import COpenSSL

#if canImport(Glibc)
    import Glibc
#endif

/// libcrypto's functions, loaded on the first use of any of them (see the COpenSSL shim) rather than
/// linked, so that a program that never needs cryptography (the `security` command asking a daemon)
/// never pays for loading it.
///
/// A library the program cannot do without is missing: the process ends as the dynamic loader ends
/// one whose linked library is missing (status 127, the loader's reason on standard error), which is
/// what linking it did before. Nothing has been done with a secret by then: every use of the keychain's
/// cryptography starts here.
let libcrypto: keychain_crypto = {
    var problem: UnsafePointer<CChar>?
    if let functions = keychain_crypto_load(&problem) { return functions.pointee }
    let reason = problem.map { String(cString: $0) } ?? "unknown reason"
    let line = Array(
        "cannot load libcrypto.so.3 (Debian's libssl3, OpenSSL 3.0 or later): \(reason)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(127)
}()
