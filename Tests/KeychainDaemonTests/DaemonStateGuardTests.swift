import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Decisions the daemon makes from the keychain's state, never from a request's shape: a first
/// passcode, and who keeps a keychain awake.
final class DaemonStateGuardTests: XCTestCase {
    /// The keybag decides "no passcode yet and not empty: refused" whatever the frame says about a
    /// current passcode: the raw variants a client can send are each refused, on a keychain with items
    /// and apps, and on one with apps only.
    func testAFirstPasscodeOnAKeychainWithContentsIsRefusedWhateverTheRequestSays() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system"])
        let programs = try ClientPrograms()
        let app = try programs.app("victim")
        let helper = try programs.app("raw-requests")
        let security = ClientPrograms.built("security")
        let user: uid_t = 65534
        var result = try ClientPrograms.run(
            security, ["set-keychain-password", "-p", "8642"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output)
        result = try ClientPrograms.run(
            security,
            ["app", "register", app, "--application-identifier", "TEAM.v", "--access-group", "TEAM.v", "-p", "8642"],
            daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "victim", "v-secret"], daemon: daemon, user: user).output,
            "status 0")
        result = try ClientPrograms.run(
            security, ["set-keychain-password", "-o", "8642", "-p", "", "-y"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output)

        for current in ["anything", "-", "8642"] {
            XCTAssertEqual(
                try ClientPrograms.run(helper, ["set-passcode", "attacker", current], daemon: daemon, user: user)
                    .output,
                "status -25293", "a first passcode with current \(current) was accepted")
        }
        result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: daemon, user: user)
        XCTAssertTrue(result.output.contains("passcode: not set"), result.output)

        // Apps alone are contents too.
        XCTAssertEqual(
            try ClientPrograms.run(app, ["remove", "web", "victim"], daemon: daemon, user: user).output, "status 0")
        XCTAssertEqual(
            try ClientPrograms.run(helper, ["set-passcode", "attacker", "anything"], daemon: daemon, user: user).output,
            "status -25293")
        // The registry still refuses the attacker.
        result = try ClientPrograms.run(
            security,
            [
                "app", "register", helper, "--application-identifier", "TEAM.v", "--access-group", "TEAM.v", "-p",
                "attacker",
            ],
            daemon: daemon, user: user)
        XCTAssertNotEqual(result.status, 0, result.output)
        // Root, the administrator, still may.
        XCTAssertEqual(
            try ClientPrograms.run(helper, ["set-passcode", "root-code", "anything"], daemon: daemon).output, "status 0"
        )
    }

    /// Another user, refused on every call, and an unregistered program of the keychain's own user both
    /// send a request a second: neither keeps the keychain from its idle lock.
    func testOnlyAKeychainsOwnAppsKeepItAwake() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system", "--idle-lock", "2"])
        let programs = try ClientPrograms()
        let stranger = try programs.app("stranger")
        let service = daemon.service()
        try service.setPasscode(SecureBytesHelper.bytes("1357"), current: nil)
        XCTAssertEqual(try service.status().lockState, .unlocked)
        let deadline = Date().addingTimeInterval(6)
        var locked = false
        var requests = 0
        while Date() < deadline {
            XCTAssertEqual(
                try ClientPrograms.run(stranger, ["count", "web"], daemon: daemon, user: 65534).output, "status -34018")
            XCTAssertEqual(try ClientPrograms.run(stranger, ["count", "web"], daemon: daemon).output, "status -34018")
            requests += 2
            if try service.status().lockState == .locked {
                locked = true
                break
            }
            usleep(200_000)
        }
        XCTAssertTrue(locked, "\(requests) refused requests kept the keychain unlocked: \(daemon.log)")
    }
}
