import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import Synchronization
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
            try daemon.service().createBackup(to: .path(file), password: SecureBytesHelper.bytes("pw"), passcode: nil)
        ) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .authenticationFailed)
        }
        XCTAssertThrowsError(
            try daemon.service().createBackup(
                to: .path(file), password: SecureBytesHelper.bytes("pw"), passcode: SecureBytesHelper.bytes("0000"))
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
        // An erase through the daemon: the passcode first; then every item, the registry and the root go.
        let refused = try ClientPrograms.run(security, ["device", "erase", "-y"], daemon: daemon, input: "")
        XCTAssertNotEqual(refused.status, 0, refused.output)
        XCTAssertThrowsError(try daemon.service().eraseAllContentAndSettings(passcode: nil)) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .authenticationFailed)
        }
        let erase = try ClientPrograms.run(security, ["device", "erase", "-y", "-p", "2468"], daemon: daemon)
        XCTAssertEqual(erase.status, 0, erase.output)
        XCTAssertEqual(try daemon.service().status().lockState, .noPasscode, "a new keychain")
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "new", "me"], daemon: daemon).output, "status -34018")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "new", "me"], daemon: daemon).output, "status -25300")
        // The backup made before brings the migrating items back onto the new device.
        let again = try ClientPrograms.run(security, ["backup", "restore", file], daemon: daemon, input: "pw\n")
        XCTAssertEqual(again.status, 0, again.output)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "kept-secret")
    }

    /// Through the daemon, a backup and a restore tell how far they have come: progress frames before
    /// the answer, at most one a percent, and the command draws them as a bar on a terminal.
    func testABackupAndARestoreThroughTheDaemonTellTheirProgress() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        for index in 0..<3 {
            XCTAssertEqual(
                try ClientPrograms.run(app, ["put", "svc", "a\(index)", "s\(index)", "", "ak"], daemon: daemon).output,
                "status 0")
        }
        let file = programs.directory + "/progress.skbk"
        let told = Mutex<[[Int]]>([])
        let summary = try daemon.service().createBackup(
            to: .path(file), password: nil, passcode: nil,
            progress: { done, total in told.withLock { $0.append([done, total]) } })
        XCTAssertEqual(summary.itemCount, 3)
        XCTAssertEqual(told.withLock { $0 }, [[1, 3], [2, 3], [3, 3]])
        told.withLock { $0 = [] }
        let report = try daemon.service().restoreBackup(
            from: .path(file), password: nil, passcode: nil,
            progress: { done, total in told.withLock { $0.append([done, total]) } })
        XCTAssertEqual(report.restored, 3)
        XCTAssertEqual(told.withLock { $0 }, [[1, 3], [2, 3], [3, 3]])
        // Without a handler the same frames come and are passed over: the answer is the same.
        XCTAssertEqual(try daemon.service().restoreBackup(from: .path(file), password: nil, passcode: nil).restored, 3)
        XCTAssertEqual(try daemon.service().status().lockState, .noPasscode, "the connection is still good")

        let script = "/usr/bin/script"
        guard FileManager.default.isExecutableFile(atPath: script) else {
            throw XCTSkip("util-linux's script, which gives the command a terminal, is not installed")
        }
        let security = ClientPrograms.built("security")
        let onTerminal = try ClientPrograms.run(
            script, ["-qec", "\"\(security)\" backup restore \"\(file)\"", "/dev/null"], daemon: daemon)
        XCTAssertEqual(onTerminal.status, 0, onTerminal.output)
        XCTAssertTrue(
            onTerminal.output.contains("restoring [") && onTerminal.output.contains("100% 3/3"), onTerminal.output)
        XCTAssertTrue(onTerminal.output.contains("restored 3 items"), onTerminal.output)
    }

    /// In system mode the command makes the file as its user and passes it to the daemon, which opens
    /// nothing itself; another user's keychain is another device.
    func testInSystemModeTheFileIsTheUsersAndAnotherUsersKeychainIsAnotherDevice() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system"])
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        let security = ClientPrograms.built("security")
        let (alice, bob): (uid_t, uid_t) = (65534, 65533)
        let shared = programs.directory + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        chmod(programs.directory, 0o755)
        chmod(shared, 0o1777)
        func run(_ arguments: [String], as user: uid_t, input: String? = nil) throws -> (status: Int32, output: String)
        {
            try ClientPrograms.run(security, arguments, daemon: daemon, input: input, user: user)
        }
        XCTAssertEqual(try run(["set-keychain-password", "-p", "1111"], as: alice).status, 0)
        let register = [
            "app", "register", app, "--application-identifier", "TEAM.a", "--access-group", "TEAM.a", "-p", "1111",
        ]
        XCTAssertEqual(try run(register, as: alice).status, 0)
        XCTAssertEqual(
            try ClientPrograms.run(
                app, ["put", "mail", "alice", "alice-secret", "", "ak"], daemon: daemon, user: alice
            )
            .output, "status 0")
        XCTAssertEqual(
            try ClientPrograms.run(
                app, ["put", "device", "alice", "device-secret", "", "aku"], daemon: daemon, user: alice
            )
            .output, "status 0")

        // Without the passcode: refused. With it: the file is Alice's, made by her command.
        let file = shared + "/alice.skbk"
        XCTAssertNotEqual(try run(["backup", "create", file], as: alice, input: "\npw\n").status, 0)
        let made = try run(["backup", "create", file, "-p", "1111"], as: alice, input: "pw\n")
        XCTAssertEqual(made.status, 0, made.output)
        var info = stat()
        XCTAssertEqual(stat(file, &info), 0)
        XCTAssertEqual(info.st_uid, alice, "the command made the file, not the daemon")
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        let deviceBound = shared + "/alice-device.skbk"
        XCTAssertEqual(try run(["backup", "create", deviceBound, "--no-password", "-p", "1111"], as: alice).status, 0)

        // Bob, given copies of both: the device-bound one restores nothing (his keychain is another
        // device); the other needs its password, and brings only the migrating items.
        XCTAssertEqual(try run(["set-keychain-password", "-p", "2222"], as: bob).status, 0)
        for name in ["alice.skbk", "alice-device.skbk"] {
            let copy = shared + "/bob-" + name
            try FileManager.default.copyItem(atPath: shared + "/" + name, toPath: copy)
            chown(copy, bob, bob)
        }
        let bound = try run(["backup", "restore", shared + "/bob-alice-device.skbk", "-p", "2222"], as: bob)
        XCTAssertEqual(bound.status, Int32(UInt32(bitPattern: -26275) & 0xff), bound.output)
        let wrong = try run(["backup", "restore", shared + "/bob-alice.skbk", "-p", "2222"], as: bob, input: "guess\n")
        XCTAssertEqual(wrong.status, 51, wrong.output)
        let restored = try run(["backup", "restore", shared + "/bob-alice.skbk", "-p", "2222"], as: bob, input: "pw\n")
        XCTAssertEqual(restored.status, 0, restored.output)
        XCTAssertTrue(restored.output.contains("restored 1 items"), restored.output)
        XCTAssertTrue(restored.output.contains("not restored: 1 ThisDeviceOnly"), restored.output)
    }
}
