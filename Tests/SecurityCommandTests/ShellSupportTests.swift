import Foundation
import XCTest

/// `security completion bash|zsh`, `security help --man` and `securityd --man`, all made from the usage
/// texts the commands print.
final class ShellSupportTests: XCTestCase {
    private var cli: CommandRunner!
    private var scratch: String!

    override func setUpWithError() throws {
        cli = CommandRunner()
        scratch = cli.home + "-shell"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: scratch)
        cli = nil
    }

    /// The verbs `security help` lists.
    private func verbs() throws -> [String] {
        let help = try cli.run("help").stdout
        return help.split(separator: "\n").drop { $0 != "Commands:" }.dropFirst().compactMap {
            $0.split(separator: " ").first.map(String.init)
        }
    }

    private func bashScript() throws -> String {
        let result = try cli.run("completion", "bash")
        XCTAssertEqual(result.status, 0, result.stderr)
        let path = scratch + "/security.bash"
        try result.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// What the completion function offers for these words, the last being completed.
    private func complete(_ words: [String]) throws -> [String] {
        let script = try bashScript()
        let quoted = words.map { "'" + $0 + "'" }.joined(separator: " ")
        let program = """
            source '\(script)'
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
            _security
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try cli.run(program: "/bin/bash", ["-c", program])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    func testBashCompletionParsesAndCompletesVerbsAndFlags() throws {
        let syntax = try cli.run(program: "/bin/bash", ["-n", try bashScript()])
        XCTAssertEqual(syntax.status, 0, syntax.stderr)
        XCTAssertEqual(try complete(["security", "find-g"]), ["find-generic-password"])
        XCTAssertEqual(
            Set(try complete(["security", "find-"])),
            ["find-generic-password", "find-internet-password", "find-certificate", "find-identity"])
        XCTAssertEqual(Set(try complete(["security", ""])), Set(try verbs() + ["--version"]))
        // The flags of the verb's usage text.
        let flags = try complete(["security", "find-generic-password", "-s", "web", "-"])
        for flag in ["-a", "-s", "-g", "-w", "--json", "--access-group"] {
            XCTAssertTrue(flags.contains(flag), "\(flag) in \(flags)")
        }
        XCTAssertFalse(flags.contains("-U"), "an add flag offered for find: \(flags)")
        XCTAssertEqual(try complete(["security", "find-certificate", "-"]), ["-a", "-c", "-e", "-m", "-p", "-Z"])
        XCTAssertEqual(try complete(["security", "help", "lock-"]), ["lock-keychain"])
        XCTAssertEqual(try complete(["security", "completion", "z"]), ["zsh"])
    }

    func testZshCompletionNamesEveryVerb() throws {
        let result = try cli.run("completion", "zsh")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.hasPrefix("#compdef security\n"), result.stdout)
        for verb in try verbs() { XCTAssertTrue(result.stdout.contains("'\(verb):"), verb) }
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh") {
            let path = scratch + "/_security"
            try result.stdout.write(toFile: path, atomically: true, encoding: .utf8)
            XCTAssertEqual(try cli.run(program: "/usr/bin/zsh", ["-n", path]).status, 0)
        }
        let unknown = try cli.run("completion", "fish")
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.hasPrefix("security: unknown shell \"fish\"\nUsage: completion"), unknown.stderr)
    }

    /// Renders roff with groff where it is installed: no warnings, and the text it shows.
    private func render(_ roff: String) throws -> String? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/groff") else { return nil }
        let result = try cli.run(program: "/usr/bin/groff", ["-man", "-Tascii", "-ww", "-P", "-cbou"], input: roff)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "", "groff warned")
        return result.stdout
    }

    func testTheManPagesHaveEveryVerbAndOption() throws {
        let page = try cli.run("help", "--man")
        XCTAssertEqual(page.status, 0, page.stderr)
        XCTAssertTrue(page.stdout.hasPrefix(".TH SECURITY 1 "), page.stdout)
        let verbs = try verbs()
        XCTAssertGreaterThan(verbs.count, 15)
        for verb in verbs {
            XCTAssertTrue(page.stdout.contains("\n.B \(verb)\n"), "\(verb) has no entry")
            // Its usage text, as `security help VERB` prints it.
            let usage = try cli.run("help", verb).stdout.split(separator: "\n").first.map(String.init) ?? ""
            XCTAssertTrue(page.stdout.contains(usage.replacingOccurrences(of: "\\", with: "\\e")), usage)
        }
        if let shown = try render(page.stdout) {
            for verb in verbs { XCTAssertTrue(shown.contains("Usage: \(verb)"), verb) }
        }

        let daemon = URL(fileURLWithPath: CommandRunner.executable).deletingLastPathComponent()
            .appendingPathComponent("securityd").path
        let daemonPage = try cli.run(program: daemon, ["--man"])
        XCTAssertEqual(daemonPage.status, 0, daemonPage.stderr)
        XCTAssertTrue(daemonPage.stdout.hasPrefix(".TH SECURITYD 8 "), daemonPage.stdout)
        let shown = try render(daemonPage.stdout) ?? daemonPage.stdout
        for option in try VersionAndDaemonUsageTests.documentedDaemonOptions() + ["--version", "--man"] {
            XCTAssertTrue(
                [" ", "\n", "]"].contains { shown.contains(option + $0) }, "securityd's page lacks \(option)")
        }
    }
}
