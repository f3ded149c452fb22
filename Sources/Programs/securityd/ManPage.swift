import KeychainCore

/// The daemon's manual page, section 8, made from the usage text `--help` prints: its first lines (up to
/// the first blank one) are the synopsis, the rest the options.
func manPage(usage: String) -> String {
    // Backslashes doubled, and a line that starts with a dot or an apostrophe kept from being a request.
    func roff(_ text: some StringProtocol) -> String {
        text.replacingOccurrences(of: "\\", with: "\\e").split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }.joined(separator: "\n")
    }
    let lines = usage.split(separator: "\n", omittingEmptySubsequences: false)
    let synopsis = lines.prefix { !$0.isEmpty }.map { $0.replacingOccurrences(of: "usage: ", with: "       ") }
    let options = lines.drop { !$0.isEmpty }.drop { $0.isEmpty }
    return [
        ".TH SECURITYD 8 \"\" \"swift-keychain \(ProjectVersion.string)\" \"System Administration\"",
        ".SH NAME", "securityd \\- the keychain daemon (swift-keychain)",
        ".SH SYNOPSIS", ".nf", roff(synopsis.joined(separator: "\n")), ".fi",
        ".SH DESCRIPTION",
        "securityd is the one owner of a keychain (user mode) or of every user's keychain (system mode):",
        "clients reach items only through it, and it decides who they are from the kernel and its app registry.",
        "It runs in the foreground and logs to standard error; SIGTERM stops it once the requests in progress",
        "are answered.",
        ".SH OPTIONS", ".nf", roff(options.joined(separator: "\n")), ".fi",
        ".SH SEE ALSO", "security(1)",
    ].joined(separator: "\n") + "\n"
}
