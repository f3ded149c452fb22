import Foundation
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The command's two halves: `security` answers `find-*-password -w` and `error` itself and runs
/// `security-full`, beside it, for every other verb, in the same process; it runs only a companion that
/// its own owner (or root) owns and no one else may write, and says so when there is none.
final class CommandPairTests: XCTestCase {
    private var cli: CommandRunner!
    private var directory: String!

    override func setUpWithError() throws {
        cli = CommandRunner()
        directory = cli.home + "-pair"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: CommandRunner.executable, toPath: directory + "/security")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
        cli = nil
    }

    private func addCompanion(mode: mode_t) throws {
        let companion = directory + "/security-full"
        try FileManager.default.copyItem(atPath: CommandRunner.executable + "-full", toPath: companion)
        XCTAssertEqual(chmod(companion, mode), 0)
    }

    func testTheLeanHalfAnswersItsVerbsAndHandsOnTheRest() throws {
        try addCompanion(mode: 0o755)
        cli.executable = directory + "/security"
        // Handed on: the full half stores the item, and prints what only it knows.
        let added = try cli.run("add-generic-password", "-a", "pair", "-s", "pair.example", "-w", "hunter2")
        XCTAssertEqual(added.status, 0, added.stderr)
        let version = try cli.run("--version")
        XCTAssertTrue(version.stdout.hasPrefix("security (swift-keychain) "), version.stdout)
        let shown = try cli.run("find-generic-password", "-s", "pair.example")
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertTrue(shown.stdout.contains("\"acct\"<blob>=\"pair\""), shown.stdout)
        // Answered here: the same item, and a status's message.
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "pair.example", "-w").stdout, "hunter2\n")
        XCTAssertEqual(
            try cli.run("error", "-25300").stdout,
            "Error: 0xFFFF9D2C -25300 The specified item could not be found in the keychain.\n")
        let missing = try cli.run("find-generic-password", "-s", "nothing.example", "-w")
        XCTAssertEqual(missing.status, 44)
        XCTAssertEqual(
            missing.stderr,
            "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain.\n")
    }

    func testWithoutItsCompanionTheLeanHalfStillAnswersAndSaysWhatIsMissing() throws {
        cli.executable = directory + "/security"
        let handedOn = try cli.run("add-generic-password", "-a", "pair", "-s", "alone.example", "-w", "pw")
        XCTAssertEqual(handedOn.status, 127, handedOn.stderr)
        XCTAssertTrue(handedOn.stderr.contains(directory + "/security-full"), handedOn.stderr)
        XCTAssertFalse(handedOn.stderr.contains("pw\n"), "a password never appears in a message")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "alone.example", "-w").status, 44, "nothing stored")
        XCTAssertEqual(try cli.run("error", "0").stdout, "Error: 0x00000000 0 No error.\n")
    }

    func testACompanionOthersCanWriteIsNotRun() throws {
        try addCompanion(mode: 0o757)
        cli.executable = directory + "/security"
        let refused = try cli.run("add-generic-password", "-a", "pair", "-s", "planted.example", "-w", "pw")
        XCTAssertEqual(refused.status, 127, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("writable only by them"), refused.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "planted.example", "-w").status, 44)
        // A symbolic link in its place is not followed either.
        try FileManager.default.removeItem(atPath: directory + "/security-full")
        try FileManager.default.createSymbolicLink(
            atPath: directory + "/security-full", withDestinationPath: CommandRunner.executable + "-full")
        let linked = try cli.run("add-generic-password", "-a", "pair", "-s", "planted.example", "-w", "pw")
        XCTAssertEqual(linked.status, 127, linked.stderr)
    }

    /// The lean half installed under the full half's name ran the full half, which was itself, for ever.
    func testALeanHalfInTheFullHalfsPlaceDoesNotRunItself() throws {
        try FileManager.default.copyItem(atPath: CommandRunner.executable, toPath: directory + "/security-full")
        cli.executable = directory + "/security"
        let result = try cli.run("--version")
        XCTAssertEqual(result.status, 127, result.stderr)
        XCTAssertTrue(result.stderr.contains("nor this executable itself"), result.stderr)
    }

    /// `app register` of the command registers its other half only when that file is the command's
    /// other half: a file that merely has the name beside a copy is not given the command's groups.
    func testRegisteringTheCommandLeavesAStrangerByTheNameAlone() throws {
        let daemon = try TestDaemon()
        cli.extraEnvironment["KEYCHAIN_SOCKET"] = daemon.socket
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: directory + "/security-full")
        let copy = URL(fileURLWithPath: directory + "/security").resolvingSymlinksInPath().path
        let registered = try cli.run(
            "app", "register", copy, "--application-identifier", "security", "--access-group", "security")
        XCTAssertEqual(registered.status, 0, registered.stderr)
        XCTAssertFalse(registered.stderr.contains("other half"), registered.stderr)
        let listed = try cli.run("app", "list")
        let paths = listed.stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") }.map(String.init)
        XCTAssertEqual(paths, [copy], listed.stdout)

        // The command's own pair: both, and said so.
        let own = try cli.run(
            "app", "register", cli.executable, "--application-identifier", "security", "--access-group", "security")
        XCTAssertEqual(own.status, 0, own.stderr)
        XCTAssertTrue(own.stderr.contains("\(cli.executable)-full, the command's other half, is registered alike"))
        let removed = try cli.run("app", "remove", cli.executable + "-full")
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertEqual(try cli.run("app", "list").stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") }, [
            Substring(copy)
        ], "removing either half removes both")
    }
}
