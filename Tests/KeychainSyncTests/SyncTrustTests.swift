import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

@testable import KeychainSyncAgent

/// Who may join an account, and what a removed device keeps and loses.
final class SyncTrustTests: SyncTestCase {
    func testAWaitingDeviceSyncsNothingUntilApprovedAndSeesNoKeys() throws {
        let a = try enrolledDevice("laptop")
        try a.add("mail.example.com", "alice", "s3cret")
        _ = try a.agent.syncNow()
        let b = try TestDevice("phone")
        XCTAssertEqual(
            try b.agent.enroll(
                server: try address(1), accountName: "alice", recoverySecret: secret, deviceName: "phone"),
            .pending)
        assertSyncError(.notTrusted) { _ = try b.agent.syncNow() }
        let listed = try a.agent.devices()
        XCTAssertEqual(listed.count, 2)
        XCTAssertEqual(listed.first { !$0.isThisDevice }?.status, .pending)
        XCTAssertEqual(listed.first { $0.isThisDevice }?.status, .trusted)
        try a.agent.approve(device: try b.deviceID)
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("mail.example.com", "alice"), "s3cret")
    }

    func testWrongRecoverySecretsAreCountedOnEveryServerAndTheLimitHolds() throws {
        let a = try enrolledDevice("laptop")
        let wrong = SecureBytes(copying: Array("not the secret at all".utf8))
        for attempt in 1...SyncProtocol.recoveryGuessLimit {
            let device = try TestDevice("guess\(attempt)")
            let expected: SyncError.Code =
                attempt < SyncProtocol.recoveryGuessLimit ? .recoveryRejected : .recoveryLocked
            assertSyncError(expected) {
                _ = try device.agent.enroll(
                    server: try self.address(attempt % 2), accountName: "alice", recoverySecret: wrong, deviceName: "x")
            }
        }
        XCTAssertEqual(try postgres.query("SELECT recovery_failures FROM accounts"), "10")
        // The right secret is refused too, now: the limit is the server's, in the database.
        let late = try TestDevice("late")
        assertSyncError(.recoveryLocked) {
            _ = try late.agent.enroll(
                server: try self.address(), accountName: "alice", recoverySecret: self.secret, deviceName: "late")
        }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices"), "1")
        // A trusted device forgives them (a device that is not trusted cannot): the secret works again.
        let stranger = try SyncConnection(
            address: try address(), account: try SyncAccount.id(of: "alice"),
            keys: try SyncDeviceKeys.generate(name: "stranger"))
        assertSyncError(.notTrusted) { _ = try stranger.call(.resetRecoveryGuesses) }
        XCTAssertEqual(try a.agent.resetRecoveryGuesses(), 10)
        XCTAssertEqual(try postgres.query("SELECT recovery_failures FROM accounts"), "0")
        XCTAssertEqual(
            try late.agent.enroll(
                server: try address(), accountName: "alice", recoverySecret: secret, deviceName: "late"),
            .pending)
    }

    func testARemovedDeviceIsRefusedAndNothingWrittenAfterIsSealedForIt() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", approver: a)
        let c = try enrolledDevice("tablet", server: 1, approver: a)
        try a.add("before.example.com", "alice", "before")
        for device in [a, b, c] { _ = try device.agent.syncNow() }
        XCTAssertEqual(try c.secret("before.example.com", "alice"), "before")

        try a.agent.remove(device: try c.deviceID)
        assertSyncError(.removed) { _ = try c.agent.syncNow() }
        try a.add("after.example.com", "alice", "after")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("after.example.com", "alice"), "after")
        XCTAssertEqual(try b.agent.status().generation, 2)
        // What C holds stays (documented); nothing on the server is sealed under a key C has: every live
        // record was sealed again under generation 2, which C was never given.
        XCTAssertEqual(try c.secret("before.example.com", "alice"), "before")
        XCTAssertNil(try c.secret("after.example.com", "alice"))
        let generations = try postgres.query(
            "SELECT DISTINCT get_byte(ciphertext, 2) FROM records WHERE NOT deleted")
        XCTAssertEqual(generations, "2")
        let cKeys = try c.keychain.syncTransaction { local in try local.ledger.value("class C key 2") }
        XCTAssertNil(cKeys)
        // A removed device cannot come back with the secret either: its key stays removed.
        assertSyncError(.removed) {
            _ = try c.agent.enroll(
                server: try self.address(), accountName: "alice", recoverySecret: self.secret, deviceName: "tablet")
        }
    }

    func testAnAccountFromAnotherSecretIsNotJoinedAndAccountsStayApart() throws {
        let a = try enrolledDevice("laptop")
        try a.add("alice.example.com", "alice", "alice-secret")
        _ = try a.agent.syncNow()
        let bob = try TestDevice("bob")
        XCTAssertEqual(
            try bob.agent.enroll(
                server: try address(), accountName: "bob",
                recoverySecret: SecureBytes(copying: Array("bob's own secret".utf8)), deviceName: "bob"),
            .trusted)
        try bob.add("bob.example.com", "bob", "bob-secret")
        _ = try bob.agent.syncNow()
        XCTAssertNil(try bob.secret("alice.example.com", "alice"))
        XCTAssertNil(try a.secret("bob.example.com", "bob"))
        XCTAssertEqual(try postgres.query("SELECT count(DISTINCT account_id) FROM records"), "2")
    }

    func testAWaitingDeviceCannotMakeItselfTrustedEvenWithTheSecretAndAPrefixApprovesNothing() throws {
        let a = try enrolledDevice("laptop")
        let keys = try SyncDeviceKeys.generate(name: "intruder")
        let connection = try SyncConnection(
            address: try address(), account: try SyncAccount.id(of: "alice"), keys: keys)
        let stranger = try connection.accountState()
        XCTAssertTrue(stranger.views.isEmpty && stranger.devices.isEmpty, "a stranger reads the salt alone")
        let recovery = try RecoveryKeys(secret: secret, salt: stranger.salt)
        var join = ByteWriter()
        join.writeBytes(recovery.authenticationBytes)
        _ = try connection.call(.join, join.data)
        let genesis = try TrustView.decode(try XCTUnwrap(try connection.accountState().views.first))
        // A view naming itself, signed by itself, and one attested by a recovery identity of its own
        // making too: refused (a holder of the secret takes an account only by a recovery, which
        // removes every device: testARecoveryWithTheSecretTakesTheAccountAndEveryOtherDeviceIsOut).
        let view = try genesis.successor(members: genesis.members + [keys.device], generation: 1).attested(by: keys)
        let forgedIdentity = try SyncDeviceKeys.generate(name: "recovery")
        for candidate in [view, try view.attested(byRecovery: forgedIdentity)] {
            var publish = ByteWriter()
            publish.writeBytes(candidate.encoded())
            assertSyncError(.notTrusted) { _ = try connection.call(.publishView, publish.data) }
        }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM views"), "1")
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices WHERE status = 2"), "1")
        // The approving device takes a whole id only: a prefix (which a server could match with a key
        // of its own) approves nothing.
        assertSyncError(.invalid) { try a.agent.approve(device: String(Hex.encode(keys.device.id).prefix(8))) }
        try a.agent.approve(device: Hex.encode(keys.device.id))
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices WHERE status = 2"), "2")
    }

    func testAWaitingDeviceWhoseKeyTheServerSwappedIsNotApproved() throws {
        let a = try enrolledDevice("laptop")
        let b = try TestDevice("phone")
        XCTAssertEqual(
            try b.agent.enroll(
                server: try address(), accountName: "alice", recoverySecret: secret, deviceName: "phone"),
            .pending)
        // The server shows A the waiting device with an encryption key of its own making.
        let attacker = try SyncDeviceKeys.generate(name: "phone")
        _ = try postgres.query(
            "UPDATE devices SET encryption_key = decode('\(Hex.encode(attacker.device.encryptionKey))', 'hex') WHERE status = 1"
        )
        // The id B showed its user names B's own key: A finds no such device, and shares nothing.
        assertSyncError(.invalid) { try a.agent.approve(device: try b.deviceID) }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM views"), "1")
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices WHERE status = 2"), "1")
        // The id the server's entry would have is another one.
        let listed = try XCTUnwrap(try a.agent.devices().first { $0.status == .pending })
        XCTAssertNotEqual(Hex.encode(listed.device.id), try b.deviceID)
    }

    func testAPushSealedUnderKeysARemovalReplacedIsRefused() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", approver: a)
        let c = try enrolledDevice("tablet", approver: a)
        for device in [a, b, c] { _ = try device.agent.syncNow() }
        try a.agent.remove(device: try c.deviceID)
        // B, which has not read the new view, pushes a record sealed under generation 1.
        let keys = try XCTUnwrap(
            try b.keychain.syncTransaction { local in try SyncEnrollment.load(local, keychain: b.keychain) }
        ).keys
        let account = try SyncAccount.id(of: "alice")
        let connection = try SyncConnection(address: try address(), account: account, keys: keys)
        defer { connection.close() }
        func push(generation: UInt8) throws(SyncFailure) -> Int64 {
            var ciphertext = Data(count: 256)
            ciphertext[0] = 1
            ciphertext[1] = UInt8(ascii: "C")
            ciphertext[2] = generation
            let entry = SyncBatch.Entry(
                recordID: Data(repeating: generation, count: 16), version: 1, deleted: false,
                ciphertextHash: (try? Digest.sha256(ciphertext)) ?? Data())
            let batch: SyncBatch
            do {
                batch = try SyncBatch(account: account, writer: keys.device.id, entries: [entry]).signed(by: keys)
            } catch {
                throw SyncFailure(error)
            }
            return try connection.push(SyncPush(batch: batch, ciphertexts: [ciphertext], replacing: [0]))
        }
        XCTAssertThrowsError(try push(generation: 1)) {
            XCTAssertEqual(($0 as? SyncFailure)?.error.code, .staleView, "\($0)")
        }
        // Under the newest generation, the same push is taken (the server checks the header only).
        XCTAssertGreaterThan(try push(generation: 2), 0)
    }

    func testADeviceApprovedAfterARemovalSyncsEverything() throws {
        let a = try enrolledDevice("laptop")
        let b = try enrolledDevice("phone", approver: a)
        try a.add("kept.example.com", "alice", "kept")
        try a.add("gone.example.com", "alice", "gone")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        // B deletes an item (its tombstone is B's), then is removed.
        try b.delete("gone.example.com", "alice")
        _ = try b.agent.syncNow()
        try a.agent.remove(device: try b.deviceID)
        let c = try enrolledDevice("tablet", server: 1, approver: a)
        let report = try c.agent.syncNow()
        XCTAssertEqual(try c.secret("kept.example.com", "alice"), "kept")
        XCTAssertNil(try c.secret("gone.example.com", "alice"))
        XCTAssertGreaterThan(report.pulled, 0)
        // Every current record, the tombstone too, is of the new generation.
        XCTAssertEqual(try postgres.query("SELECT DISTINCT get_byte(ciphertext, 2) FROM records"), "2")
    }

    func testAnEraseOfAllContentLeavesTheAccountToo() throws {
        let a = try enrolledDevice("laptop")
        try a.add("mail.example.com", "alice", "s3cret")
        _ = try a.agent.syncNow()
        try a.keychain.eraseAllContentAndSettings()
        let reopened = try Keychain(
            directory: a.directory, options: KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1)))
        let agent = SyncAgent(keychain: reopened)
        XCTAssertFalse(agent.isEnrolled())
        assertSyncError(.notEnrolled) { _ = try agent.status() }
        // The item stays on the account for the other devices: an erase is not a deletion.
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records WHERE NOT deleted"), "1")
    }
}
