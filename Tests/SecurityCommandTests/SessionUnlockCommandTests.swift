import Foundation
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Scripts and test suites of other libraries on an embedded keychain with a passcode: each process
/// starts before its first unlock unless an unlock is held for the session, and the message says so.
final class SessionUnlockCommandTests: XCTestCase {
    private var cli: CommandRunner!
    private var runtime: String!

    override func setUpWithError() throws {
        cli = CommandRunner()
        runtime = NSTemporaryDirectory() + "runtime-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        chmod(runtime, 0o700)
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = runtime
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: runtime)
        cli = nil
    }

    func testAnUnlockHeldForTheSessionServesLaterCommandsAndOtherPrograms() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "ci", "-s", "token", "-w", "class-a").status, 0)
        XCTAssertEqual(try cli.run("set-keychain-password", "-p", "1234").status, 0)
        var result = try cli.run("find-generic-password", "-s", "token", "-w")
        XCTAssertEqual(result.status, 36)
        XCTAssertTrue(result.stderr.contains("unlock-keychain --session"), result.stderr)
        let dump = try cli.run("dump-keychain")
        XCTAssertEqual(dump.status, 36)
        XCTAssertTrue(dump.stderr.contains("unlock-keychain --session"), dump.stderr)

        XCTAssertEqual(try cli.run("unlock-keychain", "--session", "-p", "1234").status, 0)
        result = try cli.run("find-generic-password", "-s", "token", "-w")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, "class-a\n")
        XCTAssertEqual(try cli.run("dump-keychain").status, 0)
        // Another program on the Security API, as a library's test suite is.
        let helper = URL(fileURLWithPath: cli.executable).deletingLastPathComponent()
            .appendingPathComponent("keychain-test-helper").path
        XCTAssertEqual(try cli.run(program: helper, ["read", "token", "ci"]).stdout, "class-a\n")
        XCTAssertTrue(try cli.run("show-keychain-info").stdout.contains("state: unlocked"))

        // A lock ends it for every later process.
        XCTAssertEqual(try cli.run("lock-keychain").status, 0)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "token", "-w").status, 36)
        XCTAssertEqual(try cli.run(program: helper, ["read", "token", "ci"]).stdout, "status -25308\n")
    }

    func testWithoutARuntimeDirectoryTheSessionUnlockIsRefusedClearly() throws {
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = nil
        XCTAssertEqual(try cli.run("set-keychain-password", "-p", "1234").status, 0)
        let result = try CommandRunnerWithout(variable: "XDG_RUNTIME_DIR", cli: cli).run(
            ["unlock-keychain", "--session", "-p", "1234"])
        XCTAssertEqual(result.status, 53, result.stderr)
        XCTAssertTrue(result.stderr.contains("XDG_RUNTIME_DIR"), result.stderr)
    }
}

/// Runs the command with one variable of the test's own environment removed.
struct CommandRunnerWithout {
    let variable: String
    let cli: CommandRunner

    func run(_ arguments: [String]) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli.executable)
        process.arguments = arguments
        var environment = cli.environment
        environment[variable] = nil
        process.environment = environment
        // Both pipes are read at once (ChildProcess), so a full one cannot stall the other.
        let result = try ChildProcess.run(process, input: nil)
        return CommandResult(
            status: result.status, stdout: String(decoding: result.stdout, as: UTF8.self),
            stderr: String(decoding: result.stderr, as: UTF8.self))
    }
}
