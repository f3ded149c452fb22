import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

@testable import KeychainSyncAgent

/// Every device lost: the recovery secret brings the account back onto a new keychain, which then
/// holds it alone, under new keys and a new secret.
final class SyncRecoveryTests: SyncTestCase {
    let newSecret = SecureBytes(copying: Array("a brand new recovery secret".utf8))

    func testARecoveryWithTheSecretTakesTheAccountAndEveryOtherDeviceIsOut() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", server: 1, approver: a)
        let c = try enrolledDevice("tablet", approver: a)
        try a.add("mail.example.com", "alice", "mail-secret", label: "Mail")
        try b.add("bank.example.com", "alice", "bank-secret", protection: "ak")
        for device in [a, b, c, a] { _ = try device.agent.syncNow() }
        // A removal first: the records are sealed under generation 2, which the escrow holds too.
        try a.agent.remove(device: try c.deviceID)
        try b.update("mail.example.com", "alice", to: "mail-secret-2")
        try b.add("gone.example.com", "alice", "soon deleted")
        _ = try b.agent.syncNow()
        try b.delete("gone.example.com", "alice")
        _ = try b.agent.syncNow()
        let attributesBefore = try XCTUnwrap(try b.attributes("mail.example.com", "alice"))

        // A and B are lost. A new keychain recovers the account with the secret.
        let r = try TestDevice("new phone")
        let report = try r.agent.recover(
            server: try address(1), accountName: "alice", recoverySecret: secret, newSecret: newSecret,
            deviceName: "new phone")
        XCTAssertGreaterThan(report.sync.pulled, 0)
        XCTAssertEqual(report.sync.notTrusted, 0, "what the lost devices wrote before the recovery is applied")
        XCTAssertEqual(Set(report.removedDevices.map(\.name)), ["laptop", "phone"], "the devices it took over from")
        XCTAssertEqual(try r.secret("mail.example.com", "alice"), "mail-secret-2")
        XCTAssertEqual(try r.secret("bank.example.com", "alice"), "bank-secret")
        XCTAssertNil(try r.secret("gone.example.com", "alice"))
        XCTAssertEqual(try r.attributes("mail.example.com", "alice"), attributesBefore)
        let status = try r.agent.status()
        XCTAssertEqual(status.trustedDevices, 1)
        XCTAssertEqual(status.generation, 3)

        // The server holds one trusted device, and every record sealed under the new generation.
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices WHERE status = 2"), "1")
        XCTAssertEqual(try postgres.query("SELECT DISTINCT get_byte(ciphertext, 2) FROM records"), "3")
        // The lost devices are out, for good.
        for lost in [a, b] { assertSyncError(.removed, { _ = try lost.agent.syncNow() }) }

        // The old secret is spent: it neither joins nor recovers again.
        let late = try TestDevice("late")
        assertSyncError(.recoveryRejected) {
            _ = try late.agent.enroll(
                server: try self.address(), accountName: "alice", recoverySecret: self.secret, deviceName: "late")
        }
        assertSyncError(.recoveryRejected) {
            _ = try late.agent.recover(
                server: try self.address(), accountName: "alice", recoverySecret: self.secret,
                newSecret: self.newSecret, deviceName: "late")
        }
        // The new one joins, as any secret does: approval by the device that holds the account.
        XCTAssertEqual(
            try late.agent.enroll(
                server: try address(), accountName: "alice", recoverySecret: newSecret, deviceName: "late"),
            .pending)
        try r.agent.approve(device: try late.deviceID)
        _ = try late.agent.syncNow()
        XCTAssertEqual(try late.secret("mail.example.com", "alice"), "mail-secret-2")
        XCTAssertEqual(try late.secret("bank.example.com", "alice"), "bank-secret")
    }

    func testARecoveryInterruptedOnTheWayIsFinishedByRunningItAgain() throws {
        let a = try enrolledDevice("laptop")
        try a.add("mail.example.com", "alice", "mail-secret")
        _ = try a.agent.syncNow()
        // The database holds the recovery's write back; the server dies while it waits.
        let locker = Process()
        locker.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        locker.arguments = [
            postgres.conninfo, "-c", "BEGIN; LOCK TABLE views IN EXCLUSIVE MODE; SELECT pg_sleep(3); COMMIT;",
        ]
        locker.standardOutput = FileHandle.nullDevice
        try locker.run()
        Thread.sleep(forTimeInterval: 0.5)
        let r = try TestDevice("new phone")
        let (agent, server, secret, newSecret) = (r.agent, try address(1), secret, newSecret)
        let failed = expectation(description: "the recovery fails on the way")
        Thread.detachNewThread {
            do {
                _ = try agent.recover(
                    server: server, accountName: "alice", recoverySecret: secret, newSecret: newSecret,
                    deviceName: "new phone")
            } catch let error as SyncError where error.code == .unavailable {
                failed.fulfill()
            } catch {}
        }
        Thread.sleep(forTimeInterval: 1.5)
        servers[1].stop()
        wait(for: [failed], timeout: 20)
        locker.waitUntilExit()
        // Nothing was made: A is still trusted, and this keychain holds the recovery, unfinished.
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM views"), "1")
        assertSyncError(.invalid) { _ = try r.agent.syncNow() }
        // Run again (through a server that answers), it finishes with the keys it began with.
        servers[1] = try TestSyncServer(database: postgres.conninfo)
        try r.agent.setServer(try address(1))
        let report = try r.agent.recover(
            server: try address(1), accountName: "alice", recoverySecret: secret, newSecret: newSecret,
            deviceName: "new phone")
        XCTAssertEqual(report.sync.notTrusted, 0)
        XCTAssertEqual(try r.secret("mail.example.com", "alice"), "mail-secret")
        assertSyncError(.removed) { _ = try a.agent.syncNow() }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices WHERE status = 2"), "1")
    }

    func testAZoneKeyShareSlippedInByAnotherDeviceThanTheOneThatMadeTheKeyIsRefused() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", approver: a)
        try a.add("mail.example.com", "alice", "mail-secret")
        _ = try a.agent.syncNow()
        // B (say, stolen) and the server put a key of B's choosing in the escrow in place of A's.
        let latest = try TrustView.decode(
            try XCTUnwrap(
                Hex.decode(try postgres.query("SELECT encode(view, 'hex') FROM views ORDER BY epoch DESC LIMIT 1"))))
        let bKeys = try XCTUnwrap(
            try b.keychain.syncTransaction { local in try SyncEnrollment.load(local, keychain: b.keychain) }
        ).keys
        let forged = try ZoneKeyShare.make(
            zoneKey: try SecureBytes(randomCount: 32), generation: 1, account: latest.account, to: latest.recovery,
            from: bKeys)
        _ = try postgres.query(
            "UPDATE shares SET share = decode('\(Hex.encode(forged.encoded()))', 'hex') WHERE recipient = decode('\(Hex.encode(latest.recovery.id))', 'hex')"
        )
        let r = try TestDevice("new phone")
        assertSyncError(.forged) {
            _ = try r.agent.recover(
                server: try self.address(), accountName: "alice", recoverySecret: self.secret,
                newSecret: self.newSecret, deviceName: "new phone")
        }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices WHERE status = 2"), "2", "nothing changed")
        XCTAssertFalse(r.agent.isEnrolled())
    }

    func testARecoveryNeedsTheSecretAndTheEscrowTheSecretMade() throws {
        let a = try enrolledDevice("laptop")
        try a.add("mail.example.com", "alice", "mail-secret")
        _ = try a.agent.syncNow()
        let r = try TestDevice("new phone")
        let wrong = SecureBytes(copying: Array("not the secret at all".utf8))
        assertSyncError(.recoveryRejected) {
            _ = try r.agent.recover(
                server: try self.address(), accountName: "alice", recoverySecret: wrong, newSecret: self.newSecret,
                deviceName: "new phone")
        }
        XCTAssertEqual(try postgres.query("SELECT recovery_failures FROM accounts"), "1", "counted as a guess")
        // The server hands out another account's escrow (sealed under another secret, or the same
        // secret for another account): it does not open.
        let bob = try TestDevice("bob")
        _ = try bob.agent.enroll(server: try address(), accountName: "bob", recoverySecret: secret, deviceName: "bob")
        _ = try postgres.query(
            "UPDATE accounts SET escrow = (SELECT escrow FROM accounts ORDER BY created_at DESC LIMIT 1)")
        assertSyncError(.forged) {
            _ = try r.agent.recover(
                server: try self.address(), accountName: "alice", recoverySecret: self.secret,
                newSecret: self.newSecret, deviceName: "new phone")
        }
        XCTAssertFalse(r.agent.isEnrolled())
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices WHERE status = 2"), "2", "nothing changed")
        _ = try a.agent.syncNow()
    }

    func testARecoveryIsRefusedWhenTheLogMovedSinceItWasReadAndThenSucceeds() throws {
        let a = try enrolledDevice("laptop")
        try a.add("mail.example.com", "alice", "mail-secret")
        _ = try a.agent.syncNow()
        // A recovering device reads the account; then A (not lost after all) writes.
        let account = try SyncAccount.id(of: "alice")
        let keys = try SyncDeviceKeys.generate(name: "racer")
        let connection = try SyncConnection(address: try address(), account: account, keys: keys)
        defer { connection.close() }
        let old = try RecoveryKeys(secret: secret, salt: try connection.accountState().salt)
        var request = ByteWriter()
        request.writeBytes(old.authenticationBytes)
        var answer = SyncReader(try connection.call(.recover, request.data), "a recovery")
        let identity = try old.openIdentity(try answer.bytes(max: 1 << 16), account: account)
        let state = try SyncAccountState.decode(try answer.bytes(max: 1 << 25))
        let latest = try TrustView.decode(try XCTUnwrap(state.views.last))
        try a.add("late.example.com", "alice", "written while recovering")
        _ = try a.agent.syncNow()
        // Its recovery view, made on the log as it read it, is refused: A's write would go unapplied.
        let view = try TrustView(
            account: account, epoch: latest.epoch + 1, previous: latest.hash, generation: latest.generation + 1,
            members: [keys.device], recovery: latest.recovery, binding: latest.binding
        ).attested(by: keys).attested(byRecovery: identity)
        var body = ByteWriter()
        body.writeBytes(view.encoded())
        body.writeBytes(Data(count: 16))
        body.writeBytes(Data(count: 32))
        body.writeBytes(Data(count: 64))
        body.write(state.lastSeq)
        body.writeCount(2)
        let zoneKey = try SecureBytes(randomCount: 32)
        for recipient in [keys.device, latest.recovery] {
            body.writeBytes(
                try ZoneKeyShare.make(
                    zoneKey: zoneKey, generation: view.generation, account: account, to: recipient, from: keys
                ).encoded())
        }
        assertSyncError(.staleView) { _ = try connection.call(.completeRecovery, body.data) }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM views"), "1")
        // A recovery on the log as it is now carries A's write.
        let r = try TestDevice("new phone")
        let report = try r.agent.recover(
            server: try address(), accountName: "alice", recoverySecret: secret, newSecret: newSecret,
            deviceName: "new phone")
        XCTAssertEqual(report.sync.notTrusted, 0)
        XCTAssertEqual(try r.secret("late.example.com", "alice"), "written while recovering")
        assertSyncError(.removed) { _ = try a.agent.syncNow() }
    }
}
