import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainTestSupport
import XCTest

/// A server that lies: each lie, made in its database, is noticed by the device that pulls it, and
/// nothing the writers did not sign is applied.
final class SyncAttackTests: SyncTestCase {
    private var a: TestDevice!
    private var b: TestDevice!

    override func setUpWithError() throws {
        try super.setUpWithError()
        a = try enrolledDevice("laptop")
        b = try enrolledDevice("phone", server: 1, approver: a)
        _ = try b.agent.syncNow()
    }

    override func tearDown() {
        a = nil
        b = nil
        super.tearDown()
    }

    /// A pull that must fail with `code` and leave B's items as they were.
    private func assertNoticed(_ code: SyncError.Code, file: StaticString = #filePath, line: UInt = #line) throws {
        let before = try b.agent.status().cursor
        assertSyncError(code, { _ = try self.b.agent.syncNow() }, file: file, line: line)
        XCTAssertEqual(try b.agent.status().cursor, before, "nothing of the page was applied", file: file, line: line)
    }

    func testSwappedCiphertextsAreRefused() throws {
        try a.add("one.example.com", "alice", "one")
        try a.add("two.example.com", "alice", "two")
        _ = try a.agent.syncNow()
        // The server hands each record the other's ciphertext, with a batch that is still signed.
        _ = try postgres.query(
            """
            UPDATE records r SET ciphertext = o.ciphertext FROM records o
            WHERE r.account_id = o.account_id AND r.record_id <> o.record_id
            """)
        try assertNoticed(.forged)
        XCTAssertNil(try b.secret("one.example.com", "alice"))
        XCTAssertNil(try b.secret("two.example.com", "alice"))
    }

    func testGarbageIsRefused() throws {
        try a.add("one.example.com", "alice", "one")
        _ = try a.agent.syncNow()
        _ = try postgres.query("UPDATE records SET ciphertext = decode(repeat('ab', 256), 'hex')")
        try assertNoticed(.forged)
        XCTAssertNil(try b.secret("one.example.com", "alice"))
    }

    func testARecordWhoseKeyIDIsSwappedIsRefused() throws {
        try a.add("one.example.com", "alice", "one")
        _ = try a.agent.syncNow()
        // The header names the key a record is sealed under (class letter, generation): the server
        // names another class's key (the item is of class A; the header says C).
        _ = try postgres.query("UPDATE records SET ciphertext = overlay(ciphertext placing '\\x43' from 2 for 1)")
        try assertNoticed(.forged)
        XCTAssertNil(try b.secret("one.example.com", "alice"))
    }

    func testMalformedMessagesAndNumbersOutOfRangeAreRefusedOnBothEnds() throws {
        // The server: a request that is not the protocol ends with `malformed`, and the server serves on.
        let keys = try SyncDeviceKeys.generate(name: "prober")
        let connection = try SyncConnection(
            address: try address(),
            account: try XCTUnwrap(Hex.decode(postgres.query("SELECT encode(account_id, 'hex') FROM accounts"))),
            keys: keys)
        assertSyncError(.malformed) { _ = try connection.call(.join, Data([0xFF, 0xFF, 0xFF, 0xFF, 1, 2])) }
        connection.close()
        XCTAssertNoThrow(try b.agent.syncNow())
        // A device: numbers at the ends of their range are refused as they are decoded.
        var page = ByteWriter()
        page.writeCount(1)
        page.write(Int64(1) << 62)
        page.writeBytes(Data(count: 8))
        page.writeCount(0)
        page.write(Int64(0))
        assertSyncError(.malformed) { _ = try SyncPullPage.decode(page.data) }
        var state = ByteWriter()
        state.writeBytes(Data(count: 16))
        for _ in 0..<4 { state.writeCount(0) }
        state.write(Int64.max)
        state.write(Int64(0))
        state.write(Int64(0))
        assertSyncError(.malformed) { _ = try SyncAccountState.decode(state.data) }
        assertSyncError(.malformed) { _ = try SyncBatch.decode(Data(repeating: 0xAB, count: 300)) }
        assertSyncError(.malformed) { _ = try SyncCheckpoint.decode(Data([1, 0, 0, 0, 9])) }
    }

    func testADeviceKeyThatIsNoKeyIsRefusedAtTheHandshake() throws {
        // A point that is not on the curve, and a signature it cannot have made.
        var point = Data([4])
        point.append(Data(repeating: 0x11, count: 64))
        let device = try SyncDevice(signingKey: point, encryptionKey: point, name: "not a key")
        let keys = SyncDeviceKeys(
            device: device, signingToken: Data(), encryptionToken: Data(),
            sign: { _ in Data(repeating: 0x30, count: 70) },
            agree: { _ in SecureBytes(copying: [UInt8](repeating: 0, count: 32)) })
        assertSyncError(.unauthenticated) {
            _ = try SyncConnection(address: try self.address(), account: Data(count: 16), keys: keys)
        }
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM devices"), "2")
    }

    func testAnOldVersionReplayedAsNewIsRefused() throws {
        try a.add("one.example.com", "alice", "version-1")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        try a.update("one.example.com", "alice", to: "version-2")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("one.example.com", "alice"), "version-2")
        // The server replays the first batch at the end of the log, and the record as it was then.
        _ = try postgres.query(
            """
            WITH old AS (SELECT first_seq, batch, writer FROM batches ORDER BY first_seq LIMIT 1 OFFSET 0),
            next AS (UPDATE accounts SET last_seq = last_seq + 1 RETURNING account_id, last_seq)
            INSERT INTO batches (account_id, first_seq, last_seq, writer, batch)
            SELECT next.account_id, next.last_seq, next.last_seq, old.writer, old.batch FROM old, next
            """)
        _ = try postgres.query(
            """
            UPDATE records r SET version = 1, seq = (SELECT last_seq FROM accounts),
            ciphertext = (SELECT ciphertext FROM history h WHERE h.record_id = r.record_id AND h.version = 1)
            """)
        try assertNoticed(.replayed)
        XCTAssertEqual(try b.secret("one.example.com", "alice"), "version-2")
    }

    func testAVersionServedAgainAtAnotherPlaceInTheLogIsNoticed() throws {
        try a.add("one.example.com", "alice", "one")
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        // The same signed batch and record again, further on: a server feeding a device without end.
        _ = try postgres.query(
            """
            WITH old AS (SELECT batch, writer FROM batches ORDER BY first_seq DESC LIMIT 1),
            next AS (UPDATE accounts SET last_seq = last_seq + 1 RETURNING account_id, last_seq)
            INSERT INTO batches (account_id, first_seq, last_seq, writer, batch)
            SELECT next.account_id, next.last_seq, next.last_seq, old.writer, old.batch FROM old, next
            """)
        _ = try postgres.query("UPDATE records SET seq = (SELECT last_seq FROM accounts)")
        try assertNoticed(.replayed)
    }

    func testAWithheldBatchIsNoticed() throws {
        try a.add("one.example.com", "alice", "one")
        _ = try a.agent.syncNow()
        try a.add("two.example.com", "alice", "two")
        _ = try a.agent.syncNow()
        _ = try postgres.query("DELETE FROM batches WHERE first_seq = (SELECT min(first_seq) FROM batches)")
        try assertNoticed(.withheld)
        XCTAssertNil(try b.secret("two.example.com", "alice"))
    }

    func testAWithheldBatchWithTheLogRenumberedAndTheHeadsHiddenIsNoticed() throws {
        try a.add("one.example.com", "alice", "one")
        _ = try a.agent.syncNow()
        let withheld = try XCTUnwrap(Int(try postgres.query("SELECT last_seq FROM accounts")))
        try a.add("two.example.com", "alice", "two")
        _ = try a.agent.syncNow()
        // The server drops the first batch, moves the second into its place so that no gap shows,
        // and hides every head that reached past it.
        _ = try postgres.query("DELETE FROM batches WHERE last_seq <= \(withheld)")
        _ = try postgres.query("DELETE FROM changes WHERE seq <= \(withheld)")
        _ = try postgres.query("UPDATE batches SET first_seq = first_seq - 1, last_seq = last_seq - 1")
        _ = try postgres.query("UPDATE changes SET seq = seq - 1")
        _ = try postgres.query("UPDATE records SET seq = seq - 1")
        _ = try postgres.query("DELETE FROM records WHERE seq < \(withheld)")
        _ = try postgres.query("UPDATE accounts SET last_seq = last_seq - 1")
        _ = try postgres.query("DELETE FROM heads")
        // The second batch's writer had read the first: it cannot stand where the first stood.
        try assertNoticed(.withheld)
        XCTAssertNil(try b.secret("two.example.com", "alice"))
    }

    func testABatchWrittenOnAnotherHistoryIsNoticedWithTheHeadsHidden() throws {
        try showEachDeviceItsOwnCopy()
        // A writes again on its history; the server shows B that batch, hiding every head.
        try a.add("later.example.com", "alice", "later")
        _ = try a.agent.syncNow()
        _ = try postgres.query("DELETE FROM heads")
        try b.agent.setServer(try SyncAddress(parsing: servers[0].socket))
        assertSyncError(.forked) { _ = try self.b.agent.syncNow() }
        XCTAssertNil(try b.secret("later.example.com", "alice"))
    }

    /// The server keeps two copies of the account and shows each device its own; each writes one item.
    private func showEachDeviceItsOwnCopy() throws {
        servers.forEach { $0.stop() }
        _ = try postgres.query("CREATE DATABASE fork TEMPLATE postgres")
        let forked = postgres.conninfo.replacingOccurrences(of: "dbname=postgres", with: "dbname=fork")
        servers = [try TestSyncServer(database: postgres.conninfo), try TestSyncServer(database: forked)]
        for (device, server) in [(a!, 0), (b!, 1)] {
            try device.agent.setServer(try SyncAddress(parsing: servers[server].socket))
        }
        try a.add("seen-by-a.example.com", "alice", "a")
        _ = try a.agent.syncNow()
        try b.add("seen-by-b.example.com", "alice", "b")
        _ = try b.agent.syncNow()
    }

    func testAWithheldCurrentVersionIsNoticed() throws {
        try a.add("one.example.com", "alice", "one")
        _ = try a.agent.syncNow()
        // The log is whole, but the record's current version is never handed out.
        _ = try postgres.query("UPDATE records SET seq = seq + 1000")
        assertSyncError(.withheld) { _ = try self.b.agent.syncNow() }
        // And at the next pull, though the log has nothing new to say about it.
        assertSyncError(.withheld) { _ = try self.b.agent.syncNow() }
        XCTAssertNil(try b.secret("one.example.com", "alice"))
    }

    func testAnotherAccountsRecordsAreRefused() throws {
        let bob = try TestDevice("bob")
        _ = try bob.agent.enroll(
            server: try address(), accountName: "bob", recoverySecret: SecureBytes(copying: Array("bob secret!".utf8)),
            deviceName: "bob")
        try bob.add("bob.example.com", "bob", "bob-secret")
        _ = try bob.agent.syncNow()
        // Bob's batch and record, served in Alice's account.
        _ = try postgres.query(
            """
            WITH alice AS (SELECT account_id FROM accounts WHERE account_id <> (SELECT account_id FROM batches LIMIT 1)),
            bump AS (UPDATE accounts SET last_seq = last_seq + 1 WHERE account_id = (SELECT account_id FROM alice)
                     RETURNING last_seq)
            INSERT INTO batches (account_id, first_seq, last_seq, writer, batch)
            SELECT (SELECT account_id FROM alice), bump.last_seq, bump.last_seq, b.writer, b.batch FROM batches b, bump
            """)
        _ = try postgres.query(
            """
            INSERT INTO records (account_id, record_id, version, seq, padded_size, deleted, ciphertext)
            SELECT a.account_id, r.record_id, r.version, a.last_seq, r.padded_size, r.deleted, r.ciphertext
            FROM records r, accounts a WHERE a.account_id <> r.account_id
            """)
        try assertNoticed(.forged)
        XCTAssertNil(try b.secret("bob.example.com", "bob"))
    }

    func testAForkedHistoryIsNoticedByTheHeadsTheDevicesSign() throws {
        try showEachDeviceItsOwnCopy()
        // B comes to A's copy: A signed a head over a history B never saw.
        try b.agent.setServer(try SyncAddress(parsing: servers[0].socket))
        assertSyncError(.forked) { _ = try self.b.agent.syncNow() }
    }

    func testADeviceOutsideTheAccountIsRefusedByTheServer() throws {
        let stranger = try SyncDeviceKeys.generate(name: "stranger")
        let connection = try SyncConnection(
            address: try address(),
            account: try XCTUnwrap(Hex.decode(postgres.query("SELECT encode(account_id, 'hex') FROM accounts"))),
            keys: stranger)
        XCTAssertEqual(connection.status, .unknown)
        let batch = try SyncBatch(
            account: connection.account, writer: stranger.device.id,
            entries: [
                SyncBatch.Entry(recordID: Data(count: 16), version: 1, deleted: false, ciphertextHash: Data(count: 32))
            ]
        ).signed(by: stranger)
        XCTAssertThrowsError(
            try connection.push(SyncPush(batch: batch, ciphertexts: [Data(count: 256)], replacing: [0]))
        ) { XCTAssertEqual(($0 as? SyncFailure)?.error.code, .notTrusted) }
        assertSyncError(.notTrusted) { _ = try connection.pull(after: 0) }
        // What a stranger may read of the account: how to stretch the secret, nothing else.
        let state = try connection.accountState()
        XCTAssertTrue(state.views.isEmpty && state.devices.isEmpty && state.shares.isEmpty)
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM records"), "0")
        // Nor may it send large messages: the server reads 256 KiB at most from a device not trusted.
        XCTAssertThrowsError(try connection.call(.createAccount, Data(count: 1 << 20)))
    }

    func testARecordOverTheLimitIsRefusedAndOneUnderItTravels() throws {
        let big = String(repeating: "x", count: 1_500_000)
        try a.add("big.example.com", "alice", big)
        _ = try a.agent.syncNow()
        _ = try b.agent.syncNow()
        XCTAssertEqual(try b.secret("big.example.com", "alice"), big)
        // Too large to travel: it stays here, counted, and does not hold the rest back.
        try a.add("huge.example.com", "alice", String(repeating: "y", count: 2_200_000))
        try a.add("small.example.com", "alice", "small")
        let report = try a.agent.syncNow()
        XCTAssertEqual(report.tooLarge, 1)
        XCTAssertEqual(report.pushed, 1)
        _ = try b.agent.syncNow()
        XCTAssertNil(try b.secret("huge.example.com", "alice"))
        XCTAssertEqual(try b.secret("small.example.com", "alice"), "small")
    }
}
