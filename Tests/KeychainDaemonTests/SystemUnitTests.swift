import Foundation
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The system daemon as its unit deploys it: its own user, only the capabilities the unit grants, no
/// new privileges, only the address families the unit allows. Everything the test grants is read
/// from `systemd/securityd-system.service`, so the unit and what was tested cannot drift apart.
final class SystemUnitTests: XCTestCase {
    static let unitPath = DeploymentTests.repository.appendingPathComponent("systemd/securityd-system.service").path
    /// Stand-ins for the unit's `securityd` user and for a user of the machine (no accounts are made).
    static let daemonUID: uid_t = 4243
    static let clientUID: uid_t = 4242

    func testTheSystemDaemonWithTheUnitsPrivilegesServesAnotherUserEndToEnd() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let unit = try SystemdUnit(path: Self.unitPath)
        XCTAssertEqual(unit.values("User"), ["securityd"])
        guard let sandbox = try AddressFamilyRestriction.prefix(allowing: unit.words("RestrictAddressFamilies")) else {
            throw XCTSkip("needs cc for the address-family sandbox")
        }
        let daemon = try TestDaemon(
            arguments: try Self.unitOptions(unit), user: Self.daemonUID, privileges: try Self.setprivOptions(unit),
            launcher: sandbox)
        // The daemon runs as its unit says, and with nothing more.
        let status = try String(contentsOfFile: "/proc/\(daemon.process.processIdentifier)/status", encoding: .utf8)
        XCTAssertTrue(status.contains("Uid:\t\(Self.daemonUID)\t\(Self.daemonUID)"), status)
        XCTAssertTrue(status.contains("NoNewPrivs:\t1"), status)
        XCTAssertTrue(status.contains("Seccomp:\t2"), status)
        XCTAssertEqual(Self.capabilities(status, "CapEff"), 1 << 19, "only CAP_SYS_PTRACE is effective")
        XCTAssertEqual(Self.capabilities(status, "CapBnd"), 1 << 19, "only CAP_SYS_PTRACE is in the bounding set")

        // A user of the machine sets a passcode, registers an app, stores and reads a secret.
        let programs = try ClientPrograms()
        let app = try programs.app("unit-app")
        let security = ClientPrograms.built("security")
        let user = Self.clientUID
        var result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        XCTAssertTrue(result.output.contains("users/\(user)"), result.output)
        result = try ClientPrograms.run(security, ["set-keychain-password", "-p", "2468"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        result = try ClientPrograms.run(
            security,
            [
                "app", "register", app, "--application-identifier", "TEAM.unit", "--access-group", "TEAM.unit", "-p",
                "2468",
            ],
            daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "alice", "unit-secret"], daemon: daemon, user: user).output,
            "status 0", daemon.log)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "alice"], daemon: daemon, user: user).output, "unit-secret",
            daemon.log)
        // Every identity check still reaches that process: its environment (refused with a loader
        // variable), its descriptors, its liveness.
        result = try ClientPrograms.run(
            app, ["read", "web", "alice"], daemon: daemon, environment: ["LD_LIBRARY_PATH": "/nonexistent"], user: user)
        XCTAssertEqual(result.output, "status -34018")
        XCTAssertTrue(daemon.log.contains("runs with LD_LIBRARY_PATH set"), daemon.log)
        XCTAssertFalse(daemon.log.contains("ended before it was identified"), daemon.log)
        XCTAssertFalse(daemon.log.contains("cannot read"), daemon.log)
    }

    func testTheUnitsGrantExactlyWhatTheDaemonNeedsAndSayWhy() throws {
        let unit = try SystemdUnit(path: Self.unitPath)
        XCTAssertEqual(unit.words("AmbientCapabilities"), ["CAP_SYS_PTRACE"])
        XCTAssertEqual(unit.words("CapabilityBoundingSet"), ["CAP_SYS_PTRACE"])
        XCTAssertEqual(Set(unit.words("RestrictAddressFamilies")), ["AF_UNIX", "AF_NETLINK"])
        XCTAssertEqual(unit.values("NoNewPrivileges"), ["yes"])
        XCTAssertEqual(unit.values("StateDirectory"), ["keychain"])
        XCTAssertEqual(unit.values("RuntimeDirectory"), ["keychain"])
        let executable = try XCTUnwrap(unit.words("ExecStart").first)
        XCTAssertEqual(executable, "/usr/local/bin/securityd", "where the install script puts it")
        // docs/daemon.md says why each grant is needed.
        let docs = try String(
            contentsOf: DeploymentTests.repository.appendingPathComponent("docs/daemon.md"), encoding: .utf8)
        for grant in ["CAP_SYS_PTRACE", "AF_NETLINK", "sock_diag", "process_vm_readv", "fdinfo", "pidfd"] {
            XCTAssertTrue(docs.contains(grant), "docs/daemon.md does not explain \(grant)")
        }
    }

    /// The unit's `ExecStart` options, with the paths the test gives instead of the system's.
    private static func unitOptions(_ unit: SystemdUnit) throws -> [String] {
        var words = unit.words("ExecStart").dropFirst().makeIterator()
        var options: [String] = []
        while let word = words.next() {
            if word == "--home" || word == "--socket" {
                _ = words.next()
                continue
            }
            options.append(word)
        }
        XCTAssertTrue(options.contains("--system"))
        return options
    }

    /// `setpriv` options for the unit's capabilities and `NoNewPrivileges=`.
    private static func setprivOptions(_ unit: SystemdUnit) throws -> [String] {
        let ambient = unit.words("AmbientCapabilities").map { "+" + $0.dropFirst("CAP_".count).lowercased() }
        let bounding = unit.words("CapabilityBoundingSet").map { "+" + $0.dropFirst("CAP_".count).lowercased() }
        var options = [
            "--inh-caps", ambient.joined(separator: ","), "--ambient-caps", ambient.joined(separator: ","),
            "--bounding-set", (["-all"] + bounding).joined(separator: ","),
        ]
        if unit.values("NoNewPrivileges") == ["yes"] { options.append("--no-new-privs") }
        return options
    }

    /// A capability mask from a `/proc/<pid>/status` line.
    private static func capabilities(_ status: String, _ field: String) -> UInt64? {
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            return UInt64(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces), radix: 16)
        }
        return nil
    }
}
