import Foundation
import KeychainBytes
import KeychainSyncStore
import KeychainTestSupport
import Synchronization
import XCTest

/// The sync server's storage against a real PostgreSQL: the schema and its migrations, compare-and-set
/// writes, the change log read from cursors, several servers on one database.
final class SyncStoreTests: XCTestCase {
    var postgres: TestPostgres!

    override func setUpWithError() throws { postgres = try TestPostgres() }
    override func tearDown() { postgres = nil }

    let account = Data("account-1".utf8)

    func padded(_ text: String) -> Data {
        var data = Data(text.utf8)
        data.append(Data(count: SyncStore.sizeBucket - data.count % SyncStore.sizeBucket))
        return data
    }

    func testTheSchemaIsMigratedOnceAndEveryKeyStartsWithTheAccount() throws {
        let first = try SyncStore(conninfo: postgres.conninfo)
        XCTAssertEqual(try first.appliedMigrations(), [1, 2, 3, 4])
        // A second server on the same database finds it done.
        let second = try SyncStore(conninfo: postgres.conninfo)
        XCTAssertEqual(try second.appliedMigrations(), [1, 2, 3, 4])
        // Every primary key and index of the sync tables leads with account_id.
        let indexes = try postgres.query(
            """
            SELECT t.relname || ':' || a.attname FROM pg_index i
            JOIN pg_class t ON t.oid = i.indrelid JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]
            WHERE t.relname IN ('accounts', 'records', 'changes', 'cursors', 'devices', 'views', 'shares', 'heads',
                'batches', 'history', 'checkpoints') ORDER BY 1
            """)
        let lines = indexes.split(separator: "\n")
        XCTAssertEqual(lines.count, 13, indexes)
        XCTAssertTrue(lines.allSatisfy { $0.hasSuffix(":account_id") }, indexes)
    }

    func testWritesAreCompareAndSetAndAStaleOneIsAConflict() throws {
        let store = try SyncStore(conninfo: postgres.conninfo)
        try store.createAccount(account)
        let id = Data([1, 2, 3])
        let created = try store.write(account: account, recordID: id, replacing: 0, ciphertext: padded("v1"))
        XCTAssertEqual(created.version, 1)
        // Created twice: the second is a conflict.
        XCTAssertThrowsError(try store.write(account: account, recordID: id, replacing: 0, ciphertext: padded("x"))) {
            XCTAssertEqual(($0 as? SyncStoreError)?.code, .conflict)
        }
        let updated = try store.write(account: account, recordID: id, replacing: 1, ciphertext: padded("v2"))
        XCTAssertEqual(updated.version, 2)
        XCTAssertGreaterThan(updated.seq, created.seq)
        // A device that read version 1 and writes over it loses to the server's version.
        XCTAssertThrowsError(try store.write(account: account, recordID: id, replacing: 1, ciphertext: padded("stale")))
        {
            XCTAssertEqual(($0 as? SyncStoreError)?.code, .conflict)
            XCTAssertTrue("\($0)".contains("at version 2"), "\($0)")
        }
        XCTAssertEqual(try store.record(account: account, recordID: id)?.ciphertext, padded("v2"))
        // A tombstone is a write like any other.
        let deleted = try store.write(
            account: account, recordID: id, replacing: 2, deleted: true, ciphertext: padded("t"))
        XCTAssertTrue(deleted.deleted)
        // Bad input: unpadded ciphertext, no account, an empty id; nothing is written.
        XCTAssertThrowsError(
            try store.write(account: account, recordID: Data([9]), replacing: 0, ciphertext: Data("x".utf8)))
        XCTAssertThrowsError(
            try store.write(account: Data("nobody".utf8), recordID: Data([9]), replacing: 0, ciphertext: padded("x")))
        XCTAssertThrowsError(try store.write(account: account, recordID: Data(), replacing: 0, ciphertext: padded("x")))
        XCTAssertNil(try store.record(account: account, recordID: Data([9])))
    }

    func testADeviceCatchesUpFromItsCursorAndAccountsStayApart() throws {
        let store = try SyncStore(conninfo: postgres.conninfo)
        try store.createAccount(account)
        try store.createAccount(Data("account-2".utf8))
        for number in 0..<25 {
            _ = try store.write(
                account: account, recordID: Data([UInt8(number)]), replacing: 0, ciphertext: padded("\(number)"))
        }
        _ = try store.write(
            account: Data("account-2".utf8), recordID: Data([1]), replacing: 0, ciphertext: padded("other"))
        _ = try store.write(account: account, recordID: Data([3]), replacing: 1, ciphertext: padded("3 again"))
        let device = Data("device-a".utf8)
        var cursor = try store.cursor(account: account, device: device)
        XCTAssertEqual(cursor, 0)
        var seen: [Data: Data] = [:]
        while true {
            let page = try store.changes(account: account, after: cursor, limit: 10)
            guard let last = page.last else { break }
            for record in page { seen[record.recordID] = record.ciphertext }
            cursor = last.seq
            try store.advanceCursor(account: account, device: device, to: cursor)
        }
        XCTAssertEqual(seen.count, 25, "each record once, as it is now")
        XCTAssertEqual(seen[Data([3])], padded("3 again"))
        XCTAssertEqual(try store.cursor(account: account, device: device), cursor)
        // A cursor only moves forward.
        try store.advanceCursor(account: account, device: device, to: 1)
        XCTAssertEqual(try store.cursor(account: account, device: device), cursor)
        XCTAssertEqual(try store.changes(account: account, after: cursor), [])
    }

    func testAPushIsWrittenOnlyWhileItsWriterIsTrustedInTheSameTransaction() throws {
        let store = try SyncStore(conninfo: postgres.conninfo)
        let writer = Data(repeating: 7, count: 16)
        let device = StoredDevice(
            id: writer, signingKey: Data([1]), encryptionKey: Data([2]), name: "laptop", status: SyncStore.trusted)
        XCTAssertEqual(
            try store.createAccount(
                account, salt: Data(count: 16), verifier: Data(count: 32), escrow: Data(), genesis: Data([1]),
                founder: device), .made)
        let record = PushedRecord(recordID: Data([1]), replacing: 0, deleted: false, ciphertext: padded("one"))
        guard case .written = try store.push(account: account, writer: writer, batch: Data([1]), records: [record])
        else { return XCTFail("a trusted writer's push is written") }
        // Removed (by a view that names the others only): its next push writes nothing.
        XCTAssertTrue(try store.appendView(account: account, epoch: 2, view: Data([2]), members: []))
        let next = PushedRecord(recordID: Data([2]), replacing: 0, deleted: false, ciphertext: padded("two"))
        guard
            case .writerNotTrusted = try store.push(account: account, writer: writer, batch: Data([2]), records: [next])
        else { return XCTFail("a removed writer's push is refused") }
        XCTAssertNil(try store.record(account: account, recordID: Data([2])))
        XCTAssertEqual(try store.lastSeq(account: account), 1, "the log did not move")
    }

    func testAnAccountsQuotaCountsItsRecordsHistoryAndLogAndRefusesWhatGoesPast() throws {
        let store = try SyncStore(conninfo: postgres.conninfo, limits: SyncLimits(accountBytes: 8192))
        let writer = Data(repeating: 7, count: 16)
        XCTAssertEqual(
            try store.createAccount(
                account, salt: Data(count: 16), verifier: Data(count: 32), escrow: Data(), genesis: Data([1]),
                founder: StoredDevice(
                    id: writer, signingKey: Data([1]), encryptionKey: Data([2]), name: "w", status: SyncStore.trusted)),
            .made)
        func push(_ id: UInt8, replacing: Int64, size: Int) throws -> SyncStore.PushOutcome {
            try store.push(
                account: account, writer: writer, batch: Data(count: 100),
                records: [
                    PushedRecord(
                        recordID: Data([id]), replacing: replacing, deleted: false, ciphertext: Data(count: size))
                ])
        }
        // What the tables hold, counted as the quota counts it: the ciphertexts, the log (a change row
        // as 64 bytes) and the views.
        let truth = """
            SELECT (SELECT coalesce(sum(padded_size), 0) FROM records) + (SELECT coalesce(sum(octet_length(ciphertext)), 0) FROM history)
                 + (SELECT coalesce(sum(octet_length(batch)), 0) FROM batches) + 64 * (SELECT count(*) FROM changes)
                 + (SELECT coalesce(sum(octet_length(view)), 0) FROM views)
            """
        for version in 0...8 {
            guard case .written = try push(1, replacing: Int64(version), size: 512) else {
                return XCTFail("version \(version + 1) fits")
            }
            XCTAssertEqual(String(try store.storedBytes(account: account)), try postgres.query(truth), "\(version)")
        }
        let before = try store.storedBytes(account: account)
        guard case .overQuota(let limit) = try push(2, replacing: 0, size: 4096) else {
            return XCTFail("past the quota")
        }
        XCTAssertEqual(limit, 8192)
        XCTAssertNil(try store.record(account: account, recordID: Data([2])), "nothing of the refused batch")
        XCTAssertEqual(try store.storedBytes(account: account), before)
        // A record with no ciphertext is refused: every record counts.
        XCTAssertThrowsError(try push(3, replacing: 0, size: 0))
        // Compaction frees what the log held.
        _ = try postgres.query(
            "INSERT INTO cursors (account_id, device_id, seq) SELECT account_id, \(Self.hex(writer)), last_seq FROM accounts"
        )
        _ = try store.putCheckpoint(account: account, seq: 9, checkpoint: Data([1]))
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM batches"), "0")
        XCTAssertEqual(String(try store.storedBytes(account: account)), try postgres.query(truth))
        // One checkpoint an account: an older one is refused.
        XCTAssertThrowsError(try store.putCheckpoint(account: account, seq: 5, checkpoint: Data([2])))
        XCTAssertEqual(try postgres.query("SELECT count(*) FROM checkpoints"), "1")
    }

    static func hex(_ data: Data) -> String { "decode('\(Hex.encode(data))', 'hex')" }

    func testNewAccountsAnHourAndWaitingDevicesAreLimited() throws {
        let store = try SyncStore(
            conninfo: postgres.conninfo, limits: SyncLimits(newAccountsPerHour: 2, waitingDevices: 2))
        func make(_ name: String) throws -> SyncStore.CreateOutcome {
            let founder = StoredDevice(
                id: Data(repeating: 1, count: 16), signingKey: Data([1]), encryptionKey: Data([2]), name: "f",
                status: SyncStore.trusted)
            return try store.createAccount(
                Data(name.utf8), salt: Data(count: 16), verifier: Data(count: 32), escrow: Data(), genesis: Data([1]),
                founder: founder)
        }
        XCTAssertEqual(try make("one"), .made)
        XCTAssertEqual(try make("one"), .exists)
        XCTAssertEqual(try make("two"), .made)
        XCTAssertEqual(try make("three"), .limited)
        _ = try postgres.query("UPDATE accounts SET created_at = now() - interval '2 hours'")
        XCTAssertEqual(try make("three"), .made, "an hour later")
        for number in UInt8(2)...5 {
            let waiting = StoredDevice(
                id: Data(repeating: number, count: 16), signingKey: Data([1]), encryptionKey: Data([2]), name: "w",
                status: SyncStore.pending)
            XCTAssertEqual(try store.addPendingDevice(account: Data("one".utf8), waiting), number < 4, "\(number)")
        }
    }

    func testTwoServersWritingOneRecordAtOnceGiveOneWinner() throws {
        let stores = [try SyncStore(conninfo: postgres.conninfo), try SyncStore(conninfo: postgres.conninfo)]
        try stores[0].createAccount(account)
        let id = Data([7])
        _ = try stores[0].write(account: account, recordID: id, replacing: 0, ciphertext: padded("base"))
        let outcomes = Mutex<[Bool]>([])
        let account = account
        let ciphertexts = (0..<16).map { padded("writer \($0)") }
        DispatchQueue.concurrentPerform(iterations: 16) { index in
            let won =
                (try? stores[index % 2].write(
                    account: account, recordID: id, replacing: 1, ciphertext: ciphertexts[index])) != nil
            outcomes.withLock { $0.append(won) }
        }
        XCTAssertEqual(outcomes.withLock { $0.filter { $0 }.count }, 1, "one write wins; the others are conflicts")
        XCTAssertEqual(try stores[1].record(account: account, recordID: id)?.version, 2)
    }
}
