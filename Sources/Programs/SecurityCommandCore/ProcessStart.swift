import KeychainCrypto
import KeychainEnvironment
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What either half of the command does to its process before it reads any secret.
package enum ProcessStart {
    /// No core file, and no other process of this user reads our memory; the work then happens in a
    /// child forked after that, whose memory no one could have opened earlier. Except with a daemon
    /// running as this same user: that daemon can tell which program is calling only while the program
    /// is dumpable, and protects nothing from this user's other processes anyway (they can read its
    /// files, and the terminal this command reads a passcode from). Ends the process (status 1) when the
    /// protection cannot be had: a secret read then could be read by others.
    package static func protectBeforeReadingSecrets() {
        if KeychainServices.servedByDaemonOfThisUser() {
            ProcessProtection.forbidCoreFiles()
        } else {
            guard ProcessProtection.protectProcess(), ProcessProtection.continueInProtectedChild() else {
                StandardError.write("security: cannot protect this process's memory; nothing was done\n")
                exit(1)
            }
        }
        // A write past the file-size limit fails with EFBIG and is reported, rather than killing the
        // process at a moment of the limit-setter's choosing.
        signal(SIGXFSZ, SIG_IGN)
    }

    /// This process is ours alone: OpenSSL starts without reading openssl.cnf, a cost paid on every
    /// start (see `CryptoLibrary`). It loads libcrypto.
    package static func startCryptography() {
        CryptoLibrary.startWithoutSystemConfiguration()
    }
}
