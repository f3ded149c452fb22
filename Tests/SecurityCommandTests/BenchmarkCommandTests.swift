import Foundation
import XCTest

@testable import keychain_bench

/// keychain-bench's command line and its tables, through the debug build beside these tests.
final class BenchmarkCommandTests: XCTestCase {
    private var cli: CommandRunner!
    private var scratch: String!

    override func setUpWithError() throws {
        cli = CommandRunner()
        scratch = NSTemporaryDirectory() + "keychain-bench-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        // The benchmark makes its keychains under TMPDIR: an empty one shows whether a run made any.
        cli.extraEnvironment["TMPDIR"] = scratch
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: scratch)
        cli = nil
    }

    private var benchmark: String {
        URL(fileURLWithPath: CommandRunner.executable).deletingLastPathComponent()
            .appendingPathComponent("keychain-bench").path
    }

    /// Every flag the README's Performance section and docs/keys.md's Speed section name in a
    /// keychain-bench command, as backquoted spans that start with the command or a flag.
    private func documentedFlags() throws -> Set<String> {
        let root = SecurityCommandTests.packageRoot
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let keys = try String(contentsOfFile: root + "/docs/keys.md", encoding: .utf8)
        let sections = [Self.section("## Performance", of: readme), Self.section("## Speed", of: keys)]
        var flags = Set<String>()
        for section in sections {
            XCTAssertFalse(section.isEmpty, "a documented section is missing")
            for (index, span) in section.components(separatedBy: "`").enumerated() where index % 2 == 1 {
                let words = span.split(separator: " ").map(String.init)
                guard let first = words.first, first.hasPrefix("--") || first.hasSuffix("keychain-bench") else {
                    continue
                }
                flags.formUnion(words.filter { $0.hasPrefix("--") })
            }
        }
        return flags
    }

    private static func flags(in usage: String) -> Set<String> {
        Set(
            usage.split(whereSeparator: { " \n[]|,".contains($0) }).map(String.init).filter { $0.hasPrefix("--") })
    }

    private static func section(_ heading: String, of text: String) -> String {
        guard let start = text.range(of: "\n" + heading + "\n") else { return "" }
        let rest = text[start.upperBound...]
        let end = rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex
        return String(rest[..<end])
    }

    func testHelpListsEveryDocumentedFlagAndRunsNothing() throws {
        let flags = try documentedFlags()
        for flag in ["--sizes", "--samples", "--write-samples", "--command-samples", "--keys-only", "--daemon-only"] {
            XCTAssertTrue(flags.contains(flag), "the documentation names \(flag)")
        }
        let started = Date()
        let help = try cli.run(program: benchmark, ["--help"])
        XCTAssertEqual(help.status, 0, help.stderr)
        XCTAssertTrue(help.stdout.hasPrefix("usage: keychain-bench"), help.stdout)
        XCTAssertEqual(help.stderr, "")
        let listed = Self.flags(in: help.stdout)
        for flag in flags.union(["--million", "--passcode-only", "--profile-daemon", "--engine-adds", "--help"]) {
            XCTAssertTrue(listed.contains(flag), "--help lists \(flag)")
        }
        XCTAssertFalse(help.stdout.contains("median"), "--help measured something: \(help.stdout)")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch), [], "--help made a keychain")
        XCTAssertEqual(try cli.run(program: benchmark, ["-h"]).stdout, help.stdout)
    }

    /// Every flag the usage lists is one the benchmark accepts: given a bad value, each is refused
    /// for its value (a flag it did not know would be refused as unknown).
    func testEveryListedFlagIsAccepted() throws {
        let listed = Self.flags(in: try cli.run(program: benchmark, ["--help"]).stdout)
        XCTAssertTrue(listed.isSuperset(of: ["--sizes", "--samples", "--profile-secitem"]), "\(listed)")
        for flag in listed.subtracting([
            "--help", "--million", "--passcode-only", "--keys-only", "--daemon-only", "--backup-only", "--tpm-only",
            "--sync-only", "--per-user-command-only",
        ]) {
            let result = try cli.run(program: benchmark, [flag, "zero"])
            XCTAssertEqual(result.status, 2, flag)
            XCTAssertTrue(result.stderr.contains("keychain-bench: \(flag) needs"), result.stderr)
        }
    }

    func testAnUnknownFlagExitsTwoWithTheUsage() throws {
        let result = try cli.run(program: benchmark, ["--sample", "10"])
        XCTAssertEqual(result.status, 2)
        XCTAssertEqual(result.stdout, "")
        XCTAssertTrue(result.stderr.hasPrefix("keychain-bench: unknown argument --sample\nusage: keychain-bench"))
        XCTAssertTrue(result.stderr.contains("--write-samples N"), result.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch), [])
    }

    func testPasscodeOnlyMeasuresOnlyThePasscode() throws {
        let result = try cli.run(program: benchmark, ["--passcode-only"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = result.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, result.stdout)
        XCTAssertTrue(lines.first?.hasPrefix("unlock: one passcode derivation") ?? false, result.stdout)
        XCTAssertEqual(lines.dropFirst().filter { $0.hasPrefix("offline guesses per second") }.count, 2)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch), [], "a keychain was made")
    }

    /// The label column was 46 characters wide and cut "sign, OpenSSL directly: RSA-2048 PKCS#1 v1.5 SHA-256".
    func testTheLabelColumnFitsTheLongestLabel() {
        let long = "verify, OpenSSL directly: RSA-2048 PKCS#1 v1.5 SHA-256 and then some more words"
        var table = TimingTable(ratioHeadings: ["× floor", "× embedded"])
        var latencies = Latencies()
        latencies.samples = [0.000_012_5]
        table.add("floor", latencies, ratios: [1, 0.5])
        table.add(long, latencies, ratios: [1.25, 10], note: "   12 lookups/s")
        table.add("round trip → data, 16 clients", latencies, ratios: [3, 4])
        let lines = table.lines()
        XCTAssertEqual(lines.count, 4)
        XCTAssertTrue(lines[0].hasPrefix("  operation "), lines[0])
        XCTAssertTrue(lines[2].hasPrefix("  " + long + "  "), lines[2])
        XCTAssertTrue(lines[3].hasPrefix("  round trip → data, 16 clients "), lines[3])
        XCTAssertTrue(lines[2].hasSuffix("   12 lookups/s"), lines[2])
        // Each column ends where its heading ends, whatever the labels' lengths.
        for heading in ["median", "p99", "× floor", "× embedded"] {
            guard let end = lines[0].range(of: heading)?.upperBound else { return XCTFail(heading) }
            let column = lines[0].distance(from: lines[0].startIndex, to: end)
            for line in lines.dropFirst() {
                let characters = Array(line)
                XCTAssertGreaterThanOrEqual(characters.count, column, line)
                guard characters.count >= column else { continue }
                XCTAssertNotEqual(characters[column - 1], " ", "\(heading) in \(line)")
                if characters.count > column { XCTAssertEqual(characters[column], " ", "\(heading) in \(line)") }
            }
        }
    }

    /// The SecKey table as a run prints it: every label whole, the numbers after it.
    func testKeysOnlyPrintsWholeLabels() throws {
        let result = try cli.run(program: benchmark, ["--keys-only", "--samples", "2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        for label in [
            "sign, OpenSSL directly: RSA-2048 PKCS#1 v1.5 SHA-256", "verify, SecKey: RSA-2048 PKCS#1 v1.5 SHA-256",
            "sign, enclave key (embedded)",
        ] {
            let row = result.stdout.split(separator: "\n").first { $0.hasPrefix("  " + label + " ") }
            XCTAssertNotNil(row, "\(label) in \(result.stdout)")
            XCTAssertTrue(row.map { $0.dropFirst(label.count + 2).first { $0 != " " }?.isNumber ?? false } ?? false)
        }
        XCTAssertFalse(result.stdout.contains("unlock:"), "--keys-only measured the passcode")
    }
}
