// Which keychain service a SecItem call goes to (the daemon, or the embedded engine), and Apple's status
// codes with their messages, are defined below this facade, so that a program without it (the
// `security` command's lookups) decides and reports them the same way; this module's users name them as
// they always have.
@_exported import KeychainEnvironment
@_exported import KeychainStatus
