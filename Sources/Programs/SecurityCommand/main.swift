// `security`: the keychain from the shell, with the verbs, flags, output and exit codes of macOS's
// /usr/bin/security, on the keychain the Security API uses (KEYCHAIN_HOME).

import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainSystem
import Security
import SecurityCommandLine

// Before any secret is read: no core file, and no other process of this user reads our memory; the
// work then happens in a child forked after that, whose memory no one could have opened earlier.
// Except with a daemon running as this same user: that daemon can tell which program is calling only
// while the program is dumpable, and protects nothing from this user's other processes anyway (they
// can read its files, and the terminal this command reads a passcode from).
if KeychainServices.servedByDaemonOfThisUser() {
    ProcessProtection.forbidCoreFiles()
} else {
    guard ProcessProtection.protectProcess(), ProcessProtection.continueInProtectedChild() else {
        // Fail closed: without that protection a secret read here could be read by others.
        FileHandle.standardError.write(
            Data("security: cannot protect this process's memory; nothing was done\n".utf8))
        exit(1)
    }
}
// This process is ours alone: skip reading openssl.cnf, a cost paid on every start.
CryptoLibrary.startWithoutSystemConfiguration()
// A write past the file-size limit fails with EFBIG and is reported, rather than killing the process
// at a moment of the limit-setter's choosing.
signal(SIGXFSZ, SIG_IGN)
exit(SecurityCommandLine.run(CommandArgument.processArguments))
