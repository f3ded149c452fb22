import Foundation
import KeychainBytes
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

/// What the server lets an account and strangers take: `--account-quota` and
/// `--new-accounts-per-hour`, as a device meets them.
final class SyncLimitTests: SyncTestCase {
    func testTheServersLimitsRefuseAnAccountPastTheHoursAndAPushPastTheQuota() throws {
        servers.forEach { $0.stop() }
        servers = [
            try TestSyncServer(
                database: postgres.conninfo,
                arguments: { _ in ["--account-quota", "1", "--new-accounts-per-hour", "1"] })
        ]
        let a = try enrolledDevice("laptop")
        try a.add("small.example.com", "alice", "small")
        XCTAssertEqual(try a.agent.syncNow().pushed, 1)
        // 1.5 MB of ciphertext is past the account's 1 MiB: refused, and the item stays to push.
        try a.add("big.example.com", "alice", String(repeating: "x", count: 1_500_000))
        assertSyncError(.limited) { _ = try a.agent.syncNow() }
        XCTAssertEqual(try a.agent.status().pendingChanges, 1)
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records"), "1")
        // A second account this hour: refused.
        let bob = try TestDevice("bob")
        assertSyncError(.limited) {
            _ = try bob.agent.enroll(
                server: try self.address(), accountName: "bob",
                recoverySecret: SecureBytes(copying: Array("bob's own secret".utf8)), deviceName: "bob")
        }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM accounts"), "1")
    }

    func testALimitThatIsNotAWholeNumberIsAUsageError() throws {
        for arguments in [["--account-quota", "-1"], ["--new-accounts-per-hour", "many"], ["--account-quota"]] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TestSyncServer.binary)
            process.arguments = ["--database", postgres.conninfo, "--listen", "/tmp/unused.sock"] + arguments
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 64, "\(arguments)")
        }
    }
}
