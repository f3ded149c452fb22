import Foundation
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A per-user daemon run by an ordinary user (not root), as systemd's user manager runs it: the kernel
/// lets it look into its clients only while they are dumpable, and the clients stay so for it.
final class UserModeTests: XCTestCase {
    func testADaemonOfAnOrdinaryUserIdentifiesItsAppsAndTheCommand() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let nobody: uid_t = 65534
        let daemon = try TestDaemon(user: nobody)
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        let stranger = try programs.app("stranger")
        let security = ClientPrograms.built("security")

        // The daemon's owner registers the app and the command, as themselves.
        for (program, identifier) in [(app, "TEAM.app"), (security, "TEAM.cli")] {
            let result = try ClientPrograms.run(
                security,
                ["app", "register", program, "--application-identifier", identifier, "--access-group", "TEAM.shared"],
                daemon: daemon, user: nobody)
            XCTAssertEqual(result.status, 0, result.output + daemon.log)
        }
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "alice", "s3cret"], daemon: daemon, user: nobody).output,
            "status 0", daemon.log)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "alice"], daemon: daemon, user: nobody).output, "s3cret")
        // The command reads it through the daemon, identified like any app; being a general-purpose tool,
        // only once the user approves (here, the simulated sensor answers for them).
        var result = try ClientPrograms.run(
            security, ["find-generic-password", "-s", "web", "-a", "alice", "-w"], daemon: daemon, user: nobody)
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: -25293) & 0xff), result.output)
        XCTAssertTrue(result.output.contains("neither a passcode nor enrolled biometry"), result.output)
        for step in [["biometry", "enroll"], ["biometry", "policy", "match"]] {
            XCTAssertEqual(try ClientPrograms.run(security, step, daemon: daemon, user: nobody).status, 0)
        }
        // The log says what was done as the command spells it.
        XCTAssertTrue(daemon.log.contains("biometry policy match by pid"), daemon.log)
        XCTAssertFalse(daemon.log.contains("Optional("), daemon.log)
        result = try ClientPrograms.run(
            security, ["find-generic-password", "-s", "web", "-a", "alice", "-w"], daemon: daemon, user: nobody)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        XCTAssertEqual(result.output, "s3cret")
        // An executable that is not registered is still refused: identification works, it is not skipped.
        XCTAssertEqual(
            try ClientPrograms.run(stranger, ["read", "web", "alice"], daemon: daemon, user: nobody).output,
            "status -34018")
        XCTAssertTrue(daemon.log.contains("\(stranger) is not registered"), daemon.log)
        // Lock state through the command acts for the app too.
        result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: daemon, user: nobody)
        XCTAssertEqual(result.status, 0, result.output)

        // The daemon's files are the user's, 0600 in a 0700 directory.
        var info = stat()
        XCTAssertEqual(stat(daemon.home, &info), 0)
        XCTAssertEqual(info.st_uid, nobody)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
    }
}
