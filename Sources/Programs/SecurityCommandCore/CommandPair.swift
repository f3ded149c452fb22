import KeychainBytes

#if canImport(Glibc)
    import Glibc
#endif

/// The `security` command is two executables installed side by side: `security`, the lean half that
/// answers the lookups scripts make most without Foundation or the Security API, and `security-full`,
/// every verb, which the lean half starts in its place (the same process: `exec`) for anything else.
/// To the daemon and to the embedded keychain they are one program (see `AppVerbs` and the daemon's
/// `CommandRecognition`).
package enum CommandPair {
    package static let leanName = "security"
    package static let fullName = "security-full"

    /// The other half of the command whose file is at `path`: `security-full` for any other name
    /// (the lean half may be copied under another), `security` for `security-full`; beside it.
    package static func companion(of path: String) -> String {
        let name = PathText.lastComponent(path) == fullName ? leanName : fullName
        return PathText.join(PathText.parent(path), name)
    }

    /// The variable that tells `security-full` the lean half's name, which is the pair's application
    /// identifier without a daemon (the lean half may be copied under another name).
    package static let nameVariable = "KEYCHAIN_COMMAND_NAME"

    /// Replaces this process with `security-full` from this executable's own directory, with the same
    /// arguments and environment (and `nameVariable`). Returns only when it could not: the reason, for
    /// the caller to report. Run only: a regular file, not a link, and not this very file (a lean half
    /// installed under the full half's name would run itself for ever); owned by this executable's
    /// owner, or by root when this executable is root's; writable by no one else; in a directory that not
    /// everyone can write (a file planted in a shared directory such as /tmp is not run, nor a root-owned
    /// program linked there; whoever else can write the directory can replace this executable too). It is run by its path after these checks: whoever could swap it in between can write the
    /// directory, and could as well have replaced this executable.
    package static func runFullCommand() -> String {
        guard let own = realpath("/proc/self/exe", nil) else { return "cannot find this executable's directory" }
        let ownPath = String(cString: own)
        free(own)
        let directory = PathText.parent(ownPath)
        let fullPath = PathText.join(directory, fullName)
        var lean = stat()
        var folder = stat()
        guard stat(ownPath, &lean) == 0, stat(directory, &folder) == 0 else {
            return "cannot read \(ownPath) or its directory: \(String(cString: strerror(errno)))"
        }
        var full = stat()
        guard lstat(fullPath, &full) == 0 else { return "cannot find \(fullPath): \(String(cString: strerror(errno)))" }
        guard full.st_mode & S_IFMT == S_IFREG, full.st_dev != lean.st_dev || full.st_ino != lean.st_ino,
            full.st_uid == lean.st_uid, full.st_mode & (S_IWGRP | S_IWOTH) == 0, folder.st_mode & S_IWOTH == 0
        else {
            return "\(fullPath) is not a regular file of the command's owner, writable only by them, in a directory "
                + "not everyone can write (nor this executable itself)"
        }
        setenv(nameVariable, PathText.lastComponent(ownPath), 1)
        _ = execv(fullPath, CommandLine.unsafeArgv)
        return "cannot run \(fullPath): \(String(cString: strerror(errno)))"
    }

    /// The name `security-full` takes as the pair's: the lean half's, when it was started by it.
    package static var pairName: String {
        getenv(nameVariable).flatMap { String(validatingCString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? leanName
    }
}
