// `security-full`: every verb of the `security` command, over the Security API. The lean `security`
// beside it runs it (exec) for every invocation it does not answer itself (see `CommandPair`); run
// directly it behaves the same.

import KeychainCore
import KeychainEnvironment
import SecurityCommandCore
import SecurityCommandLine

#if canImport(Glibc)
    import Glibc
#endif

// One program with the lean half: what either stores without a daemon is in the same access group,
// the lean half's name (unless an Info.plist beside them names the application).
ClientIdentity.identifyThisProgram(as: CommandPair.pairName)
ProcessStart.protectBeforeReadingSecrets()
ProcessStart.startCryptography()
exit(SecurityCommandLine.run(CommandArgument.processArguments))
