import Foundation
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The sync server as its unit deploys it: its own user, no capability, no new privileges, only the
/// address families the unit allows. What the test grants is read from
/// `systemd/keychain-syncd.service`, so the unit and what was tested cannot drift apart.
final class SyncUnitTests: SyncTestCase {
    static let unitPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("systemd/keychain-syncd.service").path
    /// A stand-in for the unit's `keychain-syncd` user (no account is made).
    static let serverUID: uid_t = 4245

    func testTheServerWithTheUnitsPrivilegesServesDevices() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            throw XCTSkip("needs root and setpriv")
        }
        let unit = try SystemdUnit(path: Self.unitPath)
        guard let sandbox = try AddressFamilyRestriction.prefix(allowing: unit.words("RestrictAddressFamilies")) else {
            throw XCTSkip("needs cc for the address-family sandbox")
        }
        XCTAssertEqual(unit.words("CapabilityBoundingSet"), [], "no capability")
        var privileges = ["--bounding-set", "-all", "--inh-caps", "-all"]
        if unit.values("NoNewPrivileges") == ["yes"] { privileges.append("--no-new-privs") }
        servers.forEach { $0.stop() }
        servers = [
            try TestSyncServer(
                database: postgres.conninfo, user: Self.serverUID, privileges: privileges, launcher: sandbox)
        ]
        let status = try String(contentsOfFile: "/proc/\(servers[0].processIdentifier)/status", encoding: .utf8)
        XCTAssertTrue(status.contains("Uid:\t\(Self.serverUID)\t\(Self.serverUID)"), status)
        XCTAssertTrue(status.contains("NoNewPrivs:\t1"), status)
        XCTAssertTrue(status.contains("Seccomp:\t2"), status)
        XCTAssertTrue(status.contains("CapEff:\t0000000000000000"), status)
        XCTAssertTrue(status.contains("CapBnd:\t0000000000000000"), status)

        // Two devices enroll, approve and sync through it.
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", approver: a)
        try a.add("mail.example.com", "alice", "through the unit")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "through the unit")
    }

    func testTheUnitRunsTheInstalledServerAsItsOwnUserWithNothingMore() throws {
        let unit = try SystemdUnit(path: Self.unitPath)
        XCTAssertEqual(unit.values("User"), ["keychain-syncd"])
        XCTAssertEqual(unit.words("ExecStart").first, "/usr/local/bin/keychain-syncd")
        XCTAssertTrue(unit.values("ExecStart")[0].contains("--database"))
        XCTAssertTrue(unit.values("ExecStart")[0].contains("--listen /run/keychain-syncd/sync.sock"))
        XCTAssertEqual(unit.values("RuntimeDirectory"), ["keychain-syncd"])
        XCTAssertEqual(unit.values("NoNewPrivileges"), ["yes"])
        XCTAssertEqual(unit.words("AmbientCapabilities"), [])
        XCTAssertEqual(Set(unit.words("RestrictAddressFamilies")), ["AF_UNIX", "AF_INET", "AF_INET6"])
        let sysusers = try String(
            contentsOfFile: Self.unitPath.replacingOccurrences(of: ".service", with: ".sysusers.conf"), encoding: .utf8)
        XCTAssertTrue(sysusers.contains("u keychain-syncd "), sysusers)
    }
}
