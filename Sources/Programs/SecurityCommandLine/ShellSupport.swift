import Foundation
import KeychainCore
import SecurityCommandCore

/// Shell completion and the man page, generated from `Usage.verbs`: the verbs, their summaries and the
/// flags their usage texts name, so that neither can drift from what `security help` prints.
enum ShellSupport {
    /// The flags a usage text names (`-a`, `--json`), in order, each once.
    static func flags(in usage: String) -> [String] {
        guard let expression = try? NSRegularExpression(pattern: "(?:^|[\\s\\[|(])(--?[A-Za-z][A-Za-z0-9-]*)")
        else { return [] }
        let range = NSRange(usage.startIndex..., in: usage)
        var seen: [String] = []
        for match in expression.matches(in: usage, range: range) {
            guard let flagRange = Range(match.range(at: 1), in: usage) else { continue }
            let flag = String(usage[flagRange])
            if !seen.contains(flag) { seen.append(flag) }
        }
        return seen
    }

    private static var verbNames: [String] { Usage.verbs.map(\.0) + ["--version"] }

    // MARK: completion

    static func completion(for shell: String) -> String? {
        switch shell {
        case "bash": bash
        case "zsh": zsh
        default: nil
        }
    }

    static var bash: String {
        var cases: [String] = []
        for (verb, _, usage) in Usage.verbs {
            cases.append("    \(verb)) flags=\"\(flags(in: usage).joined(separator: " "))\" ;;")
        }
        return """
            # bash completion for security (swift-keychain \(ProjectVersion.string)), made by `security completion bash`.
            # Load it with: source <(security completion bash)
            _security() {
                local current="${COMP_WORDS[COMP_CWORD]}"
                if [ "$COMP_CWORD" -eq 1 ]; then
                    COMPREPLY=($(compgen -W "\(verbNames.joined(separator: " "))" -- "$current"))
                    return 0
                fi
                if [ "${COMP_WORDS[1]}" = help ] || [ "${COMP_WORDS[1]}" = completion ]; then
                    local words="\(Usage.verbs.map(\.0).joined(separator: " "))"
                    [ "${COMP_WORDS[1]}" = completion ] && words="bash zsh"
                    COMPREPLY=($(compgen -W "$words" -- "$current"))
                    return 0
                fi
                local flags=""
                case "${COMP_WORDS[1]}" in
            \(cases.joined(separator: "\n"))
                esac
                case "$current" in
                -*) COMPREPLY=($(compgen -W "$flags" -- "$current")) ;;
                *) COMPREPLY=($(compgen -f -- "$current")) ;;
                esac
                return 0
            }
            complete -F _security security

            """
    }

    /// A zsh word in single quotes.
    private static func zshQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    static var zsh: String {
        let described = Usage.verbs.map { verb, summary, _ in
            "        " + zshQuoted(verb + ":" + summary.replacingOccurrences(of: ":", with: "\\:"))
        }
        var cases: [String] = []
        for (verb, _, usage) in Usage.verbs {
            cases.append("        \(verb)) flags=(\(flags(in: usage).map(zshQuoted).joined(separator: " "))) ;;")
        }
        return """
            #compdef security
            # zsh completion for security (swift-keychain \(ProjectVersion.string)), made by `security completion zsh`.
            # Save it as _security in a directory of $fpath, or load it with: source <(security completion zsh)
            _security() {
                local -a verbs flags
                verbs=(
            \(described.joined(separator: "\n"))
                )
                if (( CURRENT == 2 )); then
                    _describe 'command' verbs
                    compadd -- --version
                    return
                fi
                case $words[2] in
                    help) _describe 'command' verbs; return ;;
                    completion) compadd -- bash zsh; return ;;
            \(cases.joined(separator: "\n"))
                esac
                if [[ $PREFIX == -* ]]; then
                    compadd -- $flags
                else
                    _files
                fi
            }
            if [[ $funcstack[1] == _security ]]; then
                _security "$@"
            else
                compdef _security security
            fi

            """
    }

    // MARK: man page

    /// Text as roff: backslashes doubled, and a line that starts with a dot or an apostrophe (a request
    /// to roff) protected by a zero-width character.
    static func roff(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\e").split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }.joined(separator: "\n")
    }

    static var manPage: String {
        var lines = [
            ".TH SECURITY 1 \"\" \"swift-keychain \(ProjectVersion.string)\" \"User Commands\"",
            ".SH NAME", "security \\- command-line interface to the keychain (swift-keychain)",
            ".SH SYNOPSIS", ".B security", ".I command", "[\\fIoptions\\fR] [\\fIargs\\fR...]", ".br",
            ".B security --version",
            ".SH DESCRIPTION",
            roff(
                """
                security follows macOS's /usr/bin/security: the same verbs, flags, output layout and exit codes,
                on the keychain the Security module uses (KEYCHAIN_HOME, KEYCHAIN_ACCESS_GROUPS), or through the
                keychain daemon, securityd(8), when KEYCHAIN_SOCKET names its socket or the default one answers.
                A keychain error exits with the low byte of its OSStatus; usage errors exit 2.
                security answers find-generic-password and find-internet-password with -w,
                add-generic-password, add-internet-password and error itself, and runs security-full from
                its own directory for every other command (exit 127, with the reason, when it cannot); the
                two are installed together and are one program to the daemon.
                """),
            ".SH COMMANDS",
        ]
        for (verb, summary, usage) in Usage.verbs {
            lines += [".TP", ".B " + roff(verb), roff(summary), ".RS", ".nf", roff(usage), ".fi", ".RE"]
        }
        lines += [
            ".SH ENVIRONMENT", ".TP", ".B KEYCHAIN_HOME", "The embedded keychain's directory.", ".TP",
            ".B KEYCHAIN_SOCKET", "The daemon's socket; empty for the embedded keychain.", ".TP",
            ".B KEYCHAIN_ACCESS_GROUPS",
            "The access groups of the embedded keychain's caller (ignored through the daemon).", ".TP",
            ".B KEYCHAIN_COMMAND_NAME",
            "Set by security for security-full: the name it takes as its application identifier.",
            ".SH FILES", ".TP", ".B security-full",
            "Beside security: every command but the lookups with -w, the additions and error.",
            ".SH SEE ALSO", "securityd(8)",
        ]
        return lines.joined(separator: "\n") + "\n"
    }
}
