import Foundation
import KeychainTestSupport
import XCTest

/// The per-user unit: what `systemd-analyze verify` cannot see, and the daemon started as it says.
final class UserUnitTests: XCTestCase {
    static let unitPath = DeploymentTests.repository.appendingPathComponent("systemd/securityd.service").path

    /// Settings that make systemd build a mount namespace: in a user unit they need `PrivateUsers=` on
    /// systemd 252, where a unit with them fails to start (the manager has no privilege to mount).
    static let mountNamespaceSettings = [
        "PrivateTmp", "ProtectSystem", "ProtectHome", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths",
        "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups", "BindPaths",
        "TemporaryFileSystem",
    ]

    func testTheUserUnitNeedsNoPrivilegeAUserManagerLacks() throws {
        let unit = try SystemdUnit(path: Self.unitPath)
        let used = Self.mountNamespaceSettings.filter { !unit.values($0).isEmpty }
        if unit.values("PrivateUsers") != ["yes"] {
            XCTAssertEqual(used, [], "a user unit with these and no PrivateUsers= fails on systemd 252")
        }
        // A path that may not exist yet (a new user has no keychain directory) must be optional.
        for path in unit.words("ReadWritePaths") + unit.words("ReadOnlyPaths") {
            XCTAssertTrue(path.hasPrefix("-"), "\(path) is required to exist")
        }
        XCTAssertEqual(Set(unit.words("RestrictAddressFamilies")), ["AF_UNIX", "AF_NETLINK"])
        XCTAssertEqual(unit.words("ExecStart").first, "/usr/local/bin/securityd")
    }

    func testAUserDaemonWithTheUnitsRestrictionsServesItsUser() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let unit = try SystemdUnit(path: Self.unitPath)
        guard let sandbox = try AddressFamilyRestriction.prefix(allowing: unit.words("RestrictAddressFamilies")) else {
            throw XCTSkip("needs cc for the address-family sandbox")
        }
        let user: uid_t = 4244
        let options = Array(unit.words("ExecStart").dropFirst())
        let daemon = try TestDaemon(
            arguments: options, user: user,
            privileges: unit.values("NoNewPrivileges") == ["yes"] ? ["--no-new-privs"] : [],
            launcher: sandbox)
        let programs = try ClientPrograms()
        let app = try programs.app("user-app")
        let security = ClientPrograms.built("security")
        var result = try ClientPrograms.run(
            security, ["app", "register", app, "--application-identifier", "TEAM.u", "--access-group", "TEAM.u"],
            daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "me", "user-secret"], daemon: daemon, user: user).output,
            "status 0", daemon.log)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "me"], daemon: daemon, user: user).output, "user-secret")
        result = try ClientPrograms.run(
            app, ["read", "web", "me"], daemon: daemon, environment: ["LD_LIBRARY_PATH": "/nonexistent"], user: user)
        XCTAssertEqual(result.output, "status -34018")
        XCTAssertFalse(daemon.log.contains("sock_diag did not answer"), daemon.log)
    }
}
