import Foundation
import KeychainCore
import Security
import SecurityCommandCore

/// The `security` command's verbs, as a library: the executable sets up the process and calls `main`;
/// tests call `run` in-process, behind whatever keychain service they choose.
public enum SecurityCommandLine {
    /// Runs one invocation (the arguments after the program name) and returns its exit status, having
    /// written its output and messages. The keychain's connections are closed afterwards, so that a
    /// process about to exit leaves a database the next one opens without replaying a log.
    public static func run(_ arguments: [CommandArgument]) -> Int32 {
        // A failure's reason: from a password lookup made here, else from the Security API's last call.
        let reasons = { SecItemFailure.lastOnThisThread }
        return Session.runInvocation(reasonsElsewhere: reasons) { session throws(Failure) in
            try dispatch(arguments, session: session)
        }
    }

    /// The same with arguments that are text.
    public static func run(_ arguments: [String]) -> Int32 { run(arguments.map(CommandArgument.init)) }

    static func dispatch(_ arguments: [CommandArgument], session: Session) throws(Failure) {
        guard let verb = arguments.first?.text else { throw .usage(verb: nil, message: "") }
        let rest = Array(arguments.dropFirst())
        switch verb {
        case "add-generic-password": try PasswordVerbs(kind: .generic, session: session).add(rest)
        case "find-generic-password": try PasswordVerbs(kind: .generic, session: session).find(rest)
        case "delete-generic-password": try PasswordVerbs(kind: .generic, session: session).delete(rest)
        case "add-internet-password": try PasswordVerbs(kind: .internet, session: session).add(rest)
        case "find-internet-password": try PasswordVerbs(kind: .internet, session: session).find(rest)
        case "delete-internet-password": try PasswordVerbs(kind: .internet, session: session).delete(rest)
        case "dump-keychain": try DumpVerb(session: session).run(rest)
        case "list-items": try ListVerb(session: session).run(rest)
        case "set-keychain-password": try StateVerbs(session: session).setPassword(rest)
        case "lock-keychain": try StateVerbs(session: session).lock(rest)
        case "unlock-keychain": try StateVerbs(session: session).unlock(rest)
        case "show-keychain-info": try StateVerbs(session: session).showInfo(rest)
        case "find-certificate": try CertificateVerbs(session: session).findCertificate(rest)
        case "add-certificates": try CertificateVerbs(session: session).addCertificates(rest)
        case "find-identity": try CertificateVerbs(session: session).findIdentity(rest)
        case "import" where SecretImportVerbs.handles(rest): try SecretImportVerbs(session: session).run(rest)
        case "import": try CertificateVerbs(session: session).importFile(rest)
        case "export": try CertificateVerbs(session: session).export(rest)
        case "app": try AppVerbs(session: session).run(rest)
        case "backup": try BackupVerbs(session: session).run(rest)
        case "sync": try SyncVerbs(session: session).run(rest)
        case "device": try DeviceVerbs(session: session).run(rest)
        case "biometry": try BiometryVerbs(session: session).run(rest)
        case "companion": try BiometryVerbs(session: session, companion: true).run(rest)
        case "error": try ServiceVerbs.printErrors(rest)
        case "--version":
            guard rest.isEmpty else { throw .usage(verb: nil, message: "--version takes no arguments") }
            print("security (swift-keychain) \(ProjectVersion.string)")
        case "completion":
            guard rest.count == 1, let script = ShellSupport.completion(for: rest[0].text) else {
                throw .usage(
                    verb: "completion",
                    message: rest.isEmpty ? "name a shell: bash or zsh" : "unknown shell \"\(rest[0].text)\"")
            }
            print(script, terminator: "")
        case "help", "-h", "--help":
            if rest.map(\.text) == ["--man"] {
                print(ShellSupport.manPage, terminator: "")
            } else if let topic = rest.first?.text {
                guard let text = Usage.text(for: topic) else {
                    throw .usage(verb: nil, message: "unknown command \"\(topic)\"")
                }
                print(text)
            } else {
                print(Usage.overview)
            }
        default:
            throw .usage(verb: nil, message: "unknown command \"\(verb)\"")
        }
    }
}
