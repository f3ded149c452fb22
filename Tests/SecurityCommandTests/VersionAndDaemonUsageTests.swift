import Foundation
import KeychainCore
import XCTest

/// `securityd --help` against docs/daemon.md's table of options, and both programs' `--version`.
final class VersionAndDaemonUsageTests: XCTestCase {
    private var cli: CommandRunner!

    override func setUp() { cli = CommandRunner() }
    override func tearDown() { cli = nil }

    private var daemon: String {
        URL(fileURLWithPath: CommandRunner.executable).deletingLastPathComponent().appendingPathComponent("securityd")
            .path
    }

    /// The options in the first column of docs/daemon.md's table (the one headed "| option |").
    static func documentedDaemonOptions() throws -> [String] {
        let text = try String(contentsOfFile: SecurityCommandTests.packageRoot + "/docs/daemon.md", encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("| option |") }) else { return [] }
        var options: [String] = []
        for line in lines[(header + 2)...] {
            guard line.hasPrefix("|") else { break }
            let firstColumn = line.dropFirst().components(separatedBy: " | ")[0]
            for (index, span) in firstColumn.components(separatedBy: "`").enumerated() where index % 2 == 1 {
                if let option = span.split(separator: " ").first, option.hasPrefix("--") {
                    options.append(String(option))
                }
            }
        }
        return options
    }

    func testDaemonHelpListsEveryDocumentedOption() throws {
        let documented = try Self.documentedDaemonOptions()
        XCTAssertTrue(documented.contains("--exit-with-parent"), "\(documented)")
        XCTAssertTrue(documented.contains("--socket"), "\(documented)")
        XCTAssertGreaterThanOrEqual(documented.count, 9, "\(documented)")
        let help = try cli.run(program: daemon, ["--help"])
        XCTAssertEqual(help.status, 0, help.stderr)
        XCTAssertTrue(help.stdout.hasPrefix("usage: securityd"), help.stdout)
        // Each one as an option the text explains: at the start of one of its lines.
        let explained = Set(
            help.stdout.split(separator: "\n").compactMap { line -> String? in
                let word = line.drop { $0 == " " }.prefix { $0 != " " }
                return word.hasPrefix("--") ? String(word) : nil
            })
        for option in documented + ["--version", "--help", "--companion"] {
            XCTAssertTrue(explained.contains(option), "securityd --help explains \(option): \(help.stdout)")
        }
    }

    func testBothProgramsPrintTheProjectVersion() throws {
        let daemonVersion = try cli.run(program: daemon, ["--version"])
        XCTAssertEqual(daemonVersion.status, 0, daemonVersion.stderr)
        XCTAssertEqual(daemonVersion.stdout, "securityd (swift-keychain) \(ProjectVersion.string)\n")
        let commandVersion = try cli.run("--version")
        XCTAssertEqual(commandVersion.status, 0, commandVersion.stderr)
        XCTAssertEqual(commandVersion.stdout, "security (swift-keychain) \(ProjectVersion.string)\n")
        XCTAssertTrue(
            ProjectVersion.string.split(separator: ".").count == 3
                && ProjectVersion.string.split(separator: ".").allSatisfy { Int($0) != nil }, ProjectVersion.string)
    }

    func testAnUnknownDaemonOptionExitsTwoWithTheUsage() throws {
        let result = try cli.run(program: daemon, ["--versions"])
        XCTAssertEqual(result.status, 2)
        XCTAssertTrue(result.stderr.hasPrefix("securityd: unknown option --versions\nusage: securityd"), result.stderr)
    }
}
