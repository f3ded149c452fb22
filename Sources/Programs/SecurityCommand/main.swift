// `security`: the keychain from the shell, with the verbs, flags, output and exit codes of macOS's
// /usr/bin/security, on the keychain the Security API uses (KEYCHAIN_HOME). This is the command's lean
// half: it answers `find-*-password -w`, `add-*-password` and `error` itself, on FoundationEssentials
// alone without the Security API, and hands every other invocation to `security-full` beside it (see
// `CommandPair`).

import KeychainEnvironment
import SecurityCommandCore

#if canImport(Glibc)
    import Glibc
#endif

let arguments = CommandArgument.processArguments
guard ServiceVerbs.handles(arguments) else {
    // Before anything else: the full command protects its own process.
    let problem = CommandPair.runFullCommand()
    StandardError.write("security: \(problem) (it runs every verb but find-*-password -w, add-*-password and error)\n")
    exit(127)
}
if ServiceVerbs.opensTheKeychain(arguments) {
    ProcessStart.protectBeforeReadingSecrets()
    // Through a daemon this process does no cryptography, and libcrypto is never loaded.
    if KeychainServices.daemonSocketInUse() == nil { ProcessStart.startCryptography() }
}
exit(ServiceVerbs.run(arguments))
