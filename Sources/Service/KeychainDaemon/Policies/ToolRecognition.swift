import Foundation
import KeychainBytes
import KeychainCore

/// Which executables are general-purpose tools: programs that run whatever their user tells them (the
/// `security` command, interpreters), so that registering one would lend its groups to every process
/// of that user. The daemon decides this itself, whatever an entry says.
struct ToolRecognition: Sendable {
    /// Knows the `security` command by its contents, so that its entries are tools whoever made them.
    let commands = CommandRecognition()

    /// Whether the caller's entry is a general-purpose tool: marked so, or known by the daemon itself
    /// whatever the entry says — the `security` command (by its contents) or an interpreter (by name).
    func isGeneralPurposeTool(_ app: AppRegistration, caller: any PeerIdentity) throws(KeychainError) -> Bool {
        if app.isGeneralPurposeTool { return true }
        let executable = try caller.executable.get()
        return caller.isKnownTool {
            Self.isInterpreter(executable.path) || commands.isTheSecurityCommand(executable.digest)
        }
    }

    /// Whether a tool's request needs the user's approval: one that hands out secrets (data, or
    /// references, a key's, from a search; a use of an enclave key) or changes items (adds, updates,
    /// deletes, new enclave keys: a process of the user could otherwise replace or remove another app's
    /// secrets through the tool). Searches for attributes alone reveal no secret and ask nobody.
    static func needsApproval(_ request: KeychainRequest) -> Bool {
        switch request {
        case .copyMatching(let query):
            // Any value at all counts: the parser decides what is true, and asking too often is safe.
            // An identity search that returns anything reads its certificates' and keys' items.
            if query["class"] == .string("idnt") {
                return ["r_Data", "r_Ref", "r_Attributes", "r_PersistentRef"].contains { query[$0] != nil }
            }
            return query["r_Data"] != nil || query["r_Ref"] != nil
        case .useEnclaveKey, .add, .addIdentity, .update, .delete, .generateEnclaveKey: return true
        default: return false
        }
    }

    /// Program names that run whatever script they are given: registering one makes every script of the
    /// user that app (its `/proc/<pid>/exe` is the interpreter's), so the daemon refuses unless told.
    static func isInterpreter(_ path: String) -> Bool {
        let name = (path as NSString).lastPathComponent
        let exact: Set<String> = [
            "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "env", "awk", "gawk",
            "mawk", "node", "nodejs", "deno", "bun", "java", "pwsh", "R", "Rscript", "guile", "racket", "sbcl",
            "ocaml", "swift", "tclsh", "wish", "expect", "gdb", "osascript", "jshell", "irb", "ipython",
            "ipython3",
        ]
        if exact.contains(name) || name.hasPrefix("ld-linux") || name.hasPrefix("ld.so") { return true }
        // Versioned names: python3.11, perl5.36, ruby3.1, lua5.4, php8.2, pypy3, tclsh8.6.
        for family in ["python", "pypy", "perl", "ruby", "lua", "luajit", "php", "tclsh", "node"]
        where name.hasPrefix(family) {
            if name.dropFirst(family.count).allSatisfy({ $0.isNumber || $0 == "." }) { return true }
        }
        return false
    }

    /// Where the system's interpreters are installed.
    static let interpreterDirectories = [
        "/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin", "/usr/lib64", "/lib64",
        "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    ]

    /// Whether `path` is one of the system's interpreters under another name: the same file (a hard
    /// link), or a copy (the same contents). A name is no proof: `cp /bin/bash ~/bin/myapp` is bash.
    /// `digest` is the file's, when the caller has it already (else it is computed if a candidate's
    /// size matches).
    static func isCopyOfAnInterpreter(_ path: String, digest: Data? = nil) -> Bool {
        var target = stat()
        guard stat(path, &target) == 0 else { return false }
        var targetDigest = digest
        for directory in interpreterDirectories {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for name in names where isInterpreter(name) {
                let candidate = (directory as NSString).appendingPathComponent(name)
                var info = stat()
                guard stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                if info.st_dev == target.st_dev, info.st_ino == target.st_ino { return true }
                guard info.st_size == target.st_size else { continue }
                if targetDigest == nil { targetDigest = ExecutableDigests.digest(ofFileAt: path) }
                guard let targetDigest, let resolved = realpath(candidate, nil) else { continue }
                let candidatePath = String(cString: resolved)
                free(resolved)
                if ExecutableDigests.digest(ofFileAt: candidatePath) == targetDigest { return true }
            }
        }
        return false
    }
}
