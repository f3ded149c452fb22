import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import XCTest

/// Backups through a user's daemon: the daemon makes and restores them, after the keychain's passcode
/// is proved, so that no other process of the user can take every app's secrets away under a password
/// of its own, or plant items in another app's group.
final class DaemonBackupTests: XCTestCase {
    func testTheCommandBacksUpAndRestoresThroughTheDaemonWithThePasscode() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        let security = ClientPrograms.built("security")
        XCTAssertEqual(
            try ClientPrograms.run(security, ["set-keychain-password", "-p", "2468"], daemon: daemon).status, 0)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "mail", "me", "kept-secret", "", "ak"], daemon: daemon).output,
            "status 0")
        let file = programs.directory + "/keychain.skbk"

        // Any other process of the user, without the passcode: refused, and no file is made.
        XCTAssertThrowsError(
            try daemon.service().createBackup(at: file, password: SecureBytesHelper.bytes("pw"), passcode: nil)
        ) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .authenticationFailed)
        }
        XCTAssertThrowsError(
            try daemon.service().createBackup(
                at: file, password: SecureBytesHelper.bytes("pw"), passcode: SecureBytesHelper.bytes("0000"))
        ) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .authenticationFailed)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: file))
        XCTAssertEqual(try daemon.service().status().failedAttempts, 1, "a wrong passcode counts like an unlock")

        // The passcode, then the backup password, one line each on standard input.
        let made = try ClientPrograms.run(security, ["backup", "create", file], daemon: daemon, input: "2468\npw\n")
        XCTAssertEqual(made.status, 0, made.output)
        XCTAssertTrue(made.output.contains("1 items"), made.output)
        XCTAssertEqual(try daemon.service().status().failedAttempts, 0)
        let info = try ClientPrograms.run(security, ["backup", "info", file], daemon: nil)
        XCTAssertTrue(info.output.contains("items: 1 (genp 1)"), info.output)

        XCTAssertEqual(try ClientPrograms.run(app, ["remove", "mail", "me"], daemon: daemon).output, "status 0")
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "status -25300")
        let restored = try ClientPrograms.run(
            security, ["backup", "restore", file, "-p", "2468"], daemon: daemon, input: "pw\n")
        XCTAssertEqual(restored.status, 0, restored.output)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "kept-secret")

        // A wrong backup password: nothing changes.
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "new", "me", "after", "", "ak"], daemon: daemon).output, "status 0")
        let wrong = try ClientPrograms.run(
            security, ["backup", "restore", file, "-p", "2468"], daemon: daemon, input: "not-it\n")
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.output.contains("wrong backup password"), wrong.output)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "new", "me"], daemon: daemon).output, "after")

        // A reboot through the daemon: every client is before its first unlock.
        XCTAssertEqual(try ClientPrograms.run(security, ["device", "reboot"], daemon: daemon).status, 0)
        XCTAssertEqual(try daemon.service().status().lockState, .beforeFirstUnlock)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "new", "me"], daemon: daemon).output, "status -25308")
        // An erase is not served by the daemon yet, and changes nothing.
        let erase = try ClientPrograms.run(security, ["device", "erase", "-y", "-p", "2468"], daemon: daemon)
        XCTAssertEqual(erase.status, Int32(UInt32(bitPattern: -4) & 0xff), erase.output)
        XCTAssertEqual(try ClientPrograms.run(security, ["unlock-keychain", "-p", "2468"], daemon: daemon).status, 0)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "new", "me"], daemon: daemon).output, "after")
    }
}
