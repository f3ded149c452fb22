import Foundation
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The command's two halves: `security` answers `find-*-password -w`, `add-*-password` and `error` itself and runs
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
        // Answered here: an item added, its password, a status's message.
        let added = try cli.run("add-generic-password", "-a", "pair", "-s", "pair.example", "-w", "hunter2")
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "pair.example", "-w").stdout, "hunter2\n")
        XCTAssertEqual(
            try cli.run("error", "-25300").stdout,
            "Error: 0xFFFF9D2C -25300 The specified item could not be found in the keychain.\n")
        let missing = try cli.run("find-generic-password", "-s", "nothing.example", "-w")
        XCTAssertEqual(missing.status, 44)
        XCTAssertEqual(
            missing.stderr,
            "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain.\n")
        // Handed on: the full half finds the same item (one access group for both) and prints what only
        // it knows.
        let shown = try cli.run("find-generic-password", "-s", "pair.example")
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertTrue(shown.stdout.contains("\"acct\"<blob>=\"pair\""), shown.stdout)
        let version = try cli.run("--version")
        XCTAssertTrue(version.stdout.hasPrefix("security (swift-keychain) "), version.stdout)
    }

    func testWithoutItsCompanionTheLeanHalfStillAnswersAndSaysWhatIsMissing() throws {
        cli.executable = directory + "/security"
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "pair", "-s", "alone.example", "-w", "pw").status, 0)
        let handedOn = try cli.run("delete-generic-password", "-a", "pair", "-s", "alone.example")
        XCTAssertEqual(handedOn.status, 127, handedOn.stderr)
        XCTAssertTrue(handedOn.stderr.contains(directory + "/security-full"), handedOn.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "alone.example", "-w").stdout, "pw\n", "not deleted")
        XCTAssertEqual(try cli.run("error", "0").stdout, "Error: 0x00000000 0 No error.\n")
    }

    func testACompanionOthersCanWriteIsNotRun() throws {
        try addCompanion(mode: 0o757)
        cli.executable = directory + "/security"
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "pair", "-s", "planted.example", "-w", "pw").status, 0)
        let refused = try cli.run("delete-generic-password", "-a", "pair", "-s", "planted.example")
        XCTAssertEqual(refused.status, 127, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("writable only by them"), refused.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "planted.example", "-w").stdout, "pw\n")
        // A symbolic link in its place is not followed either.
        try FileManager.default.removeItem(atPath: directory + "/security-full")
        try FileManager.default.createSymbolicLink(
            atPath: directory + "/security-full", withDestinationPath: CommandRunner.executable + "-full")
        let linked = try cli.run("delete-generic-password", "-a", "pair", "-s", "planted.example")
        XCTAssertEqual(linked.status, 127, linked.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "planted.example", "-w").stdout, "pw\n")
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

    /// A pair registered and then deleted from the disk: `app remove` of either name removes both
    /// entries, though neither file can be read any more.
    func testRemovingAPairWhoseFilesAreGoneRemovesBoth() throws {
        let daemon = try TestDaemon()
        cli.extraEnvironment["KEYCHAIN_SOCKET"] = daemon.socket
        try addCompanion(mode: 0o755)
        let lean = URL(fileURLWithPath: directory + "/security").resolvingSymlinksInPath().path
        let registered = try cli.run(
            "app", "register", lean, "--application-identifier", "security", "--access-group", "security")
        XCTAssertEqual(registered.status, 0, registered.stderr)
        XCTAssertEqual(try cli.run("app", "list").stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") }.count, 2)
        try FileManager.default.removeItem(atPath: lean)
        try FileManager.default.removeItem(atPath: lean + "-full")
        let removed = try cli.run("app", "remove", lean)
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertEqual(try cli.run("app", "list").stdout, "no apps registered\n")
    }
}
