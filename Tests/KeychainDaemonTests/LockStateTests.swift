import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// One lock state for every client: the daemon's.
final class LockStateTests: XCTestCase {
    func testLockingThroughTheCommandLocksEveryClientAndUnlockingRestoresThem() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        let security = ClientPrograms.built("security")
        XCTAssertEqual(
            try ClientPrograms.run(security, ["set-keychain-password", "-p", "2468"], daemon: daemon).status, 0)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "mail", "me", "class-a", "", "ak"], daemon: daemon).output, "status 0")
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "sync", "me", "class-c", "", "ck"], daemon: daemon).output, "status 0")

        XCTAssertEqual(try ClientPrograms.run(security, ["lock-keychain"], daemon: daemon).status, 0)
        // Another process, another connection: locked for it too.
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "status -25308")
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "sync", "me"], daemon: daemon).output, "class-c")
        let info = try ClientPrograms.run(security, ["show-keychain-info"], daemon: daemon)
        XCTAssertTrue(info.output.contains("state: locked"), info.output)

        XCTAssertEqual(try ClientPrograms.run(security, ["unlock-keychain", "-p", "2468"], daemon: daemon).status, 0)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "class-a")

        // A wrong passcode counts for everyone.
        let wrong = try ClientPrograms.run(security, ["unlock-keychain", "-p", "0000"], daemon: daemon)
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertEqual(try daemon.service().status().failedAttempts, 1)

        // A restart of the daemon is a reboot: before first unlock, classes A and C unavailable.
        daemon.stop()
        try daemon.start()
        XCTAssertEqual(try daemon.service().status().lockState, .beforeFirstUnlock)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "sync", "me"], daemon: daemon).output, "status -25308")
        XCTAssertEqual(try ClientPrograms.run(security, ["unlock-keychain", "-p", "2468"], daemon: daemon).status, 0)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "sync", "me"], daemon: daemon).output, "class-c")
    }

    func testAnIdleDaemonLocksItself() throws {
        let daemon = try TestDaemon(arguments: ["--idle-lock", "1"])
        let service = daemon.service()
        try service.setPasscode(SecureBytesHelper.bytes("1357"), current: nil)
        XCTAssertEqual(try service.status().lockState, .unlocked)
        let deadline = Date().addingTimeInterval(10)
        while try service.status().lockState == .unlocked, Date() < deadline { usleep(100_000) }
        XCTAssertEqual(try service.status().lockState, .locked)
        XCTAssertTrue(daemon.log.contains("without use"), daemon.log)
    }
}
