import Foundation
import KeychainTestSupport
import XCTest

/// securityd with a TPM root, run as its unit runs it (its own user, its address families), against a
/// software TPM of the test's own.
final class TPMDaemonTests: XCTestCase {
    /// How the user unit starts securityd (its arguments, privileges and address-family sandbox), or
    /// a skip naming what this machine lacks for it.
    private func unitLaunch() throws -> (arguments: [String], privileges: [String], launcher: [String]) {
        try XCTSkipUnless(SoftwareTPM.isAvailable, "swtpm is not installed (apt-get install swtpm swtpm-tools)")
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let unit = try SystemdUnit(path: UserUnitTests.unitPath)
        guard let sandbox = try AddressFamilyRestriction.prefix(allowing: unit.words("RestrictAddressFamilies")) else {
            throw XCTSkip("needs cc for the address-family sandbox")
        }
        let privileges = unit.values("NoNewPrivileges") == ["yes"] ? ["--no-new-privs"] : []
        return (Array(unit.words("ExecStart").dropFirst()), privileges, sandbox)
    }

    /// A test app made in `programs` (which must outlive it) and registered with the daemon in its
    /// own access group, which has stored `secret` as the password "web"/"me".
    private func registeredApp(
        _ name: String, in programs: ClientPrograms, storing secret: String, daemon: TestDaemon, user: uid_t
    ) throws -> String {
        let app = try programs.app(name)
        let result = try ClientPrograms.run(
            ClientPrograms.built("security"),
            ["app", "register", app, "--application-identifier", "TEAM.\(name)", "--access-group", "TEAM.\(name)"],
            daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "me", secret], daemon: daemon, user: user).output, "status 0",
            daemon.log)
        return app
    }

    func testADaemonWithATPMRootServesAndReopensItsKeychain() throws {
        let unit = try unitLaunch()
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let user: uid_t = 4246
        tpm.allow(uid: user)
        let daemon = try TestDaemon(
            arguments: unit.arguments + ["--tpm", tpm.tcti, "--tpm-lockout", "5:2"], user: user,
            privileges: unit.privileges, launcher: unit.launcher)
        let security = ClientPrograms.built("security")
        var result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        XCTAssertTrue(result.output.contains("device root: TPM 2.0 (\(tpm.tcti))"), result.output)
        let programs = try ClientPrograms()
        let app = try registeredApp("tpm-app", in: programs, storing: "tpm-secret", daemon: daemon, user: user)
        // A restart finds the root in the TPM again.
        daemon.stop()
        try daemon.start()
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "me"], daemon: daemon, user: user).output, "tpm-secret",
            daemon.log)
        // Without its TPM the daemon does not serve the keychain, and says why.
        daemon.stop()
        tpm.kill()
        XCTAssertThrowsError(try daemon.start()) { error in
            XCTAssertTrue("\(error)".contains("cannot use the TPM at \(tpm.tcti)"), "\(error)")
        }
        // KEYCHAIN_TPM chooses the TPM as --tpm does.
        let restarted = try SoftwareTPM()
        defer { restarted.stop() }
        restarted.allow(uid: user + 1)
        let fromEnvironment = try TestDaemon(
            arguments: unit.arguments, environment: ["KEYCHAIN_TPM": restarted.tcti], user: user + 1,
            privileges: unit.privileges, launcher: unit.launcher)
        result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: fromEnvironment, user: user + 1)
        XCTAssertTrue(result.output.contains("device root: TPM 2.0 (\(restarted.tcti))"), result.output)
        fromEnvironment.stop()
        // A TCTI that names nothing: refused at start, with the reason.
        XCTAssertThrowsError(try TestDaemon(arguments: ["--tpm", "garbage:nothing"])) { error in
            XCTAssertTrue("\(error)".contains("cannot use the TPM at garbage:nothing"), "\(error)")
        }
    }

    func testAKeychainServedWithTheSoftwareRootMovesToTheTPMAndNeverBack() throws {
        let unit = try unitLaunch()
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let user: uid_t = 4248
        tpm.allow(uid: user)
        let software = try TestDaemon(
            arguments: unit.arguments + ["--tpm", "none"], user: user, privileges: unit.privileges,
            launcher: unit.launcher)
        let security = ClientPrograms.built("security")
        var result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: software, user: user)
        XCTAssertTrue(result.output.contains("device root: software"), result.output)
        let programs = try ClientPrograms()
        let app = try registeredApp("moved-app", in: programs, storing: "kept-secret", daemon: software, user: user)
        // A daemon without a TPM has nowhere to move it, and says so.
        result = try ClientPrograms.run(security, ["device", "migrate-root", "tpm"], daemon: software, user: user)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.output.contains("no TPM") || result.output.contains("without a TPM"), result.output)
        software.stop()

        // The same keychain served by a daemon with a TPM: still the software root until it is moved.
        let daemon = try TestDaemon(
            arguments: unit.arguments + ["--tpm", tpm.tcti], home: software.home, user: user,
            privileges: unit.privileges, launcher: unit.launcher)
        result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: daemon, user: user)
        XCTAssertTrue(result.output.contains("device root: software"), result.output)
        result = try ClientPrograms.run(security, ["device", "migrate-root", "software"], daemon: daemon, user: user)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.output.contains("the software root already"), result.output)
        result = try ClientPrograms.run(security, ["device", "migrate-root", "tpm"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        XCTAssertTrue(result.output.contains("moved: the device root is now TPM 2.0 (\(tpm.tcti))"), result.output)
        XCTAssertTrue(daemon.log.contains("1 items moved, 0 unreadable"), daemon.log)
        // The app, registered before, reads its item (the registry's MAC is the inherited root's).
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "me"], daemon: daemon, user: user).output, "kept-secret",
            daemon.log)
        // The software root's file is gone; the root file now names the TPM.
        let rootFile = try Data(contentsOf: URL(fileURLWithPath: daemon.home + "/device-root"))
        XCTAssertEqual(rootFile.prefix(4), Data("SKTR".utf8))
        // Never back.
        result = try ClientPrograms.run(security, ["device", "migrate-root", "software"], daemon: daemon, user: user)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.output.contains("never moves back"), result.output)
        result = try ClientPrograms.run(security, ["device", "migrate-root", "floppy"], daemon: daemon, user: user)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.output.contains("not a kind of device root"), result.output)
        // And after a restart, the TPM root is found again.
        daemon.stop()
        try daemon.start()
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "me"], daemon: daemon, user: user).output, "kept-secret",
            daemon.log)
    }
}
