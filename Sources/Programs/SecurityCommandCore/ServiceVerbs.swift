import KeychainCore
import KeychainEnvironment
import KeychainStatus

/// The verbs the `security` command answers with the keychain service alone, without the Security
/// API's Core Foundation objects or Foundation: `find-generic-password` and `find-internet-password`
/// with `-w` (and without `--json`), `add-generic-password` and `add-internet-password`, and `error`.
/// The command's lean executable runs these itself and hands every other invocation to the full
/// command (`security-full`); the full command runs them with this same code.
public enum ServiceVerbs {
    /// Whether `arguments` (after the program name) is an invocation these verbs answer. Checked before
    /// the process does anything else, so that an invocation handed on costs one exec and no more.
    public static func handles(_ arguments: [CommandArgument]) -> Bool {
        guard let verb = arguments.first?.text else { return false }
        if verb == "error" { return true }
        let rest = Array(arguments.dropFirst())
        // What the options do not parse goes to the full command, whose usage message it gets.
        if let kind = additionKind(of: verb) { return (try? kind.addArguments(rest)) != nil }
        guard let kind = passwordKind(of: verb), let parsed = try? kind.findArguments(rest) else { return false }
        return parsed.has("w") && !parsed.has(long: "json")
    }

    /// Whether the invocation opens the keychain (and may read a secret): every one but `error`, which
    /// only prints messages, and needs neither the process's protection nor the crypto library.
    public static func opensTheKeychain(_ arguments: [CommandArgument]) -> Bool {
        arguments.first?.text != "error"
    }

    /// Runs an invocation that `handles` accepted and returns its exit status, having written its
    /// output and messages; the keychain's connections are closed afterwards, as the full command
    /// closes them.
    public static func run(_ arguments: [CommandArgument]) -> Int32 {
        Session.runInvocation { session throws(Failure) in try dispatch(arguments, session: session) }
    }

    /// The verbs themselves (the full command's dispatcher calls `addPassword`, `printPassword` and
    /// `printErrors` directly, after its own parsing).
    private static func dispatch(_ arguments: [CommandArgument], session: Session) throws(Failure) {
        guard let verb = arguments.first?.text else { throw .usage(verb: nil, message: "") }
        let rest = Array(arguments.dropFirst())
        if verb == "error" { return try printErrors(rest) }
        if let kind = additionKind(of: verb) {
            return try kind.addPassword(try kind.addArguments(rest), session: session)
        }
        guard let kind = passwordKind(of: verb) else { throw .usage(verb: nil, message: "unknown command \"\(verb)\"") }
        try kind.printPassword(try kind.findArguments(rest), session: session)
    }

    private static func additionKind(of verb: String) -> PasswordItemKind? {
        switch verb {
        case "add-generic-password": .generic
        case "add-internet-password": .internet
        default: nil
        }
    }

    private static func passwordKind(of verb: String) -> PasswordItemKind? {
        switch verb {
        case "find-generic-password": .generic
        case "find-internet-password": .internet
        default: nil
        }
    }

    /// `security error CODE...`: each status code (decimal, or hexadecimal after 0x) with its message.
    package static func printErrors(_ codes: [CommandArgument]) throws(Failure) {
        guard !codes.isEmpty else { throw .usage(verb: "error", message: "no error code given") }
        for code in codes.map(\.text) {
            let parsed = code.hasPrefix("0x") ? Int64(code.dropFirst(2), radix: 16) : Int64(code)
            guard let parsed,
                let status = OSStatus(exactly: parsed) ?? OSStatus(exactly: Int64(Int32(truncatingIfNeeded: parsed)))
            else {
                throw .usage(verb: "error", message: "\"\(code)\" is not an error code")
            }
            let hex = String(UInt32(bitPattern: status), radix: 16, uppercase: true)
            let padded = String(repeating: "0", count: 8 - hex.count) + hex
            print("Error: 0x\(padded) \(status) \(StatusMessages.message(for: status))")
        }
    }
}
