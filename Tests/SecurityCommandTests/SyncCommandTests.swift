import Foundation
import KeychainTestSupport
import XCTest

/// `security sync` and the synchronizable options, end to end: two keychains (two homes), a
/// PostgreSQL and a keychain-syncd, every step a run of the built command.
final class SyncCommandTests: XCTestCase {
    private func json(_ text: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8))
    }

    func testTwoKeychainsEnrollApproveAndSyncThroughTheCommand() throws {
        let postgres = try TestPostgres()
        let server = try TestSyncServer(database: postgres.conninfo)
        let laptop = CommandRunner()
        let phone = CommandRunner()
        let secret = "a long recovery secret\n"

        XCTAssertEqual(
            try laptop.run("add-generic-password", "-s", "mail.example.com", "-a", "alice", "-w", "pw-1", "-S").status,
            0)
        XCTAssertEqual(
            try laptop.run("add-generic-password", "-s", "local.example.com", "-a", "alice", "-w", "pw-2").status, 0)
        let enrolled = try laptop.run(
            ["sync", "enroll", "--server", server.socket, "--account", "alice", "--name", "laptop", "--json"],
            input: secret)
        XCTAssertEqual(enrolled.status, 0, enrolled.stderr)
        XCTAssertEqual((try json(enrolled.stdout) as? [String: Any])?["status"] as? String, "trusted")
        let pushed = try laptop.run("sync", "now", "--json")
        XCTAssertEqual(pushed.status, 0, pushed.stderr)
        XCTAssertEqual((try json(pushed.stdout) as? [String: Any])?["pushed"] as? Int, 1)

        let waiting = try phone.run(
            ["sync", "enroll", "--server", server.socket, "--account", "alice", "--name", "phone", "--json"],
            input: secret)
        XCTAssertEqual(waiting.status, 0, waiting.stderr)
        let phoneID = try XCTUnwrap((try json(waiting.stdout) as? [String: Any])?["device"] as? String)
        XCTAssertEqual((try json(waiting.stdout) as? [String: Any])?["status"] as? String, "waiting")
        let early = try phone.run("sync", "now")
        XCTAssertNotEqual(early.status, 0)
        XCTAssertTrue(early.stderr.contains("approve"), early.stderr)

        let devices = try laptop.run("sync", "devices", "--json")
        let listed = try XCTUnwrap(try json(devices.stdout) as? [[String: Any]])
        XCTAssertEqual(listed.count, 2)
        XCTAssertEqual(listed.first { $0["id"] as? String == phoneID }?["status"] as? String, "waiting")
        XCTAssertEqual(try laptop.run("sync", "approve", phoneID).status, 0)
        let pulled = try phone.run("sync", "now", "--json")
        XCTAssertEqual(pulled.status, 0, pulled.stderr)
        XCTAssertEqual((try json(pulled.stdout) as? [String: Any])?["pulled"] as? Int, 1)

        // Apple's default: a find without the option matches only items that do not sync.
        XCTAssertEqual(try phone.run("find-generic-password", "-s", "mail.example.com", "-w").status, 44)
        let found = try phone.run("find-generic-password", "-s", "mail.example.com", "-w", "--synchronizable", "any")
        XCTAssertEqual(found.stdout, "pw-1\n", found.stderr)
        XCTAssertEqual(
            try phone.run("find-generic-password", "-s", "mail.example.com", "--synchronizable", "no").status, 44)
        XCTAssertEqual(try phone.run("find-generic-password", "-s", "local.example.com").status, 44)
        let dumped = try phone.run("dump-keychain", "--json", "--synchronizable", "yes")
        XCTAssertEqual((try json(dumped.stdout) as? [[String: Any]])?.count, 1)
        XCTAssertEqual(try phone.run("find-generic-password", "-s", "x", "--synchronizable", "maybe").status, 2)

        XCTAssertEqual(
            try phone.run("delete-generic-password", "-s", "mail.example.com", "--synchronizable", "yes").status, 0)
        XCTAssertEqual(try phone.run("sync", "now").status, 0)
        XCTAssertEqual(try laptop.run("sync", "now").status, 0)
        XCTAssertEqual(
            try laptop.run("find-generic-password", "-s", "mail.example.com", "--synchronizable", "any").status, 44)
        let status = try laptop.run("sync", "status", "--json")
        let state = try XCTUnwrap(try json(status.stdout) as? [String: Any])
        XCTAssertEqual(state["pendingChanges"] as? Int, 0)
        XCTAssertEqual(state["trustedDevices"] as? Int, 2)
        XCTAssertNotNil(state["lastSync"] as? String)

        // The deleted item's history: its versions, then one version's secret on request.
        let history = try laptop.run("sync", "history", "-s", "mail.example.com", "-a", "alice")
        XCTAssertEqual(history.status, 0, history.stderr)
        let lines = history.stdout.split(separator: "\n")
        guard lines.count == 2 else { return XCTFail("two versions: \(history.stdout)") }
        XCTAssertTrue(lines[0].hasPrefix("version 2 ") && lines[0].hasSuffix("deleted"), history.stdout)
        XCTAssertTrue(lines[1].hasPrefix("version 1 ") && lines[1].contains("by laptop"), history.stdout)
        XCTAssertFalse(history.stdout.contains("pw-1"), "no secret unless asked for")
        let version = try laptop.run("sync", "history", "-s", "mail.example.com", "-a", "alice", "--version", "1")
        XCTAssertEqual(version.stdout, "pw-1\n", version.stderr)
        XCTAssertNotEqual(
            try laptop.run("sync", "history", "-s", "mail.example.com", "-a", "alice", "--version", "9").status, 0)
        // A wrong recovery secret, then forgiven by a trusted device.
        let stranger = CommandRunner()
        XCTAssertNotEqual(
            try stranger.run(
                ["sync", "enroll", "--server", server.socket, "--account", "alice"], input: "not the secret at all\n"
            ).status, 0)
        let forgiven = try laptop.run("sync", "reset-guesses", "--json")
        XCTAssertEqual(forgiven.status, 0, forgiven.stderr)
        XCTAssertEqual((try json(forgiven.stdout) as? [String: Any])?["forgiven"] as? Int, 1)
    }

    func testAKeychainRecoversTheAccountWhenEveryDeviceIsLost() throws {
        let postgres = try TestPostgres()
        let server = try TestSyncServer(database: postgres.conninfo)
        let lost = CommandRunner()
        XCTAssertEqual(
            try lost.run("add-generic-password", "-s", "mail.example.com", "-a", "alice", "-w", "pw-1", "-S").status, 0)
        let enrolled = try lost.run(
            ["sync", "enroll", "--server", server.socket, "--account", "alice"], input: "the old recovery secret\n")
        XCTAssertEqual(enrolled.status, 0, enrolled.stderr)
        XCTAssertEqual(try lost.run("sync", "now").status, 0)

        // A new keychain: the old secret, then the new one, each a line of standard input.
        let found = CommandRunner()
        let missingNew = try found.run(
            ["sync", "recover", "--server", server.socket, "--account", "alice"], input: "the old recovery secret\n")
        XCTAssertNotEqual(missingNew.status, 0)
        XCTAssertTrue(missingNew.stderr.contains("recovery secret"), missingNew.stderr)
        let recovered = try found.run(
            ["sync", "recover", "--server", server.socket, "--account", "alice", "--json"],
            input: "the old recovery secret\nthe new recovery secret\n")
        XCTAssertEqual(recovered.status, 0, recovered.stderr)
        let result = try XCTUnwrap(try json(recovered.stdout) as? [String: Any])
        XCTAssertEqual(result["status"] as? String, "trusted")
        XCTAssertEqual(result["pulled"] as? Int, 1)
        let secret = try found.run("find-generic-password", "-s", "mail.example.com", "-w", "--synchronizable", "any")
        XCTAssertEqual(secret.stdout, "pw-1\n", secret.stderr)
        // The lost keychain is out; the old secret joins nothing, the new one does.
        let refused = try lost.run("sync", "now")
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("removed"), refused.stderr)
        let third = CommandRunner()
        XCTAssertNotEqual(
            try third.run(
                ["sync", "enroll", "--server", server.socket, "--account", "alice"], input: "the old recovery secret\n"
            ).status, 0)
        let joined = try third.run(
            ["sync", "enroll", "--server", server.socket, "--account", "alice"], input: "the new recovery secret\n")
        XCTAssertEqual(joined.status, 0, joined.stderr)
        XCTAssertTrue(joined.stdout.contains("waits for approval"), joined.stdout)
    }

    func testBadSyncArgumentsAreUsageErrors() throws {
        let runner = CommandRunner()
        XCTAssertEqual(try runner.run("sync").status, 2)
        XCTAssertEqual(try runner.run("sync", "frobnicate").status, 2)
        XCTAssertEqual(try runner.run("sync", "enroll", "--server", "/tmp/x").status, 2)
        let remote = try runner.run("sync", "enroll", "--server", "example.com:443", "--account", "a")
        XCTAssertNotEqual(remote.status, 0)
        XCTAssertTrue(remote.stderr.contains("loopback"), remote.stderr)
        let notEnrolled = try runner.run("sync", "now")
        XCTAssertNotEqual(notEnrolled.status, 0)
        XCTAssertTrue(notEnrolled.stderr.contains("not enrolled"), notEnrolled.stderr)
    }

    /// Through securityd: the daemon enrolls its keychain, then syncs in the background, after a
    /// write of its own and when the server says the account moved on.
    func testTheDaemonSyncsItsKeychainInTheBackground() throws {
        let postgres = try TestPostgres()
        let server = try TestSyncServer(database: postgres.conninfo)
        let laptop = CommandRunner()
        let phone = CommandRunner()
        let daemon = try TestDaemon()
        phone.extraEnvironment["KEYCHAIN_SOCKET"] = daemon.socket
        for arguments in [
            [
                "app", "register", phone.executable, "--application-identifier", "security", "--access-group",
                "TEAM.cli",
            ],
            ["biometry", "enroll"], ["biometry", "policy", "match"],
        ] {
            let result = try phone.run(arguments)
            XCTAssertEqual(result.status, 0, result.stderr)
        }
        let secret = "a long recovery secret\n"
        XCTAssertEqual(
            try laptop.run("add-generic-password", "-s", "mail.example.com", "-a", "alice", "-w", "pw-1", "-S").status,
            0)
        XCTAssertEqual(
            try laptop.run(["sync", "enroll", "--server", server.socket, "--account", "alice"], input: secret).status, 0
        )
        XCTAssertEqual(try laptop.run("sync", "now").status, 0)

        let waiting = try phone.run(
            ["sync", "enroll", "--server", server.socket, "--account", "alice", "--name", "phone", "--json"],
            input: secret)
        XCTAssertEqual(waiting.status, 0, waiting.stderr)
        let phoneID = try XCTUnwrap((try json(waiting.stdout) as? [String: Any])?["device"] as? String)
        XCTAssertEqual(try laptop.run("sync", "approve", phoneID).status, 0)

        // Nobody runs `sync now` on the phone: the daemon pulls by itself.
        func eventually(_ what: String, _ check: () throws -> Bool) throws {
            let deadline = Date().addingTimeInterval(60)
            while try !check() {
                guard Date() < deadline else {
                    return XCTFail(
                        "\(what) did not happen: \((try? String(contentsOfFile: daemon.logPath, encoding: .utf8)) ?? "")"
                    )
                }
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
        try eventually("the daemon's pull") {
            try phone.run("find-generic-password", "-s", "mail.example.com", "-w", "--synchronizable", "any").stdout
                == "pw-1\n"
        }
        // A write through the daemon is pushed by itself.
        XCTAssertEqual(
            try phone.run("add-generic-password", "-s", "phone.example.com", "-a", "alice", "-w", "pw-2", "-S").status,
            0)
        try eventually("the daemon's push") {
            _ = try laptop.run("sync", "now")
            return try laptop.run("find-generic-password", "-s", "phone.example.com", "-w", "--synchronizable", "any")
                .stdout == "pw-2\n"
        }
        let status = try phone.run("sync", "status", "--json")
        XCTAssertEqual((try json(status.stdout) as? [String: Any])?["trustedDevices"] as? Int, 2, status.stderr)
    }
}
