import Foundation
import KeychainBytes

/// One record of a push, as the server stores it.
public struct PushedRecord: Sendable {
    public var recordID: Data
    public var replacing: Int64
    public var deleted: Bool
    public var ciphertext: Data

    public init(recordID: Data, replacing: Int64, deleted: Bool, ciphertext: Data) {
        self.recordID = recordID
        self.replacing = replacing
        self.deleted = deleted
        self.ciphertext = ciphertext
    }
}

/// A stored batch and where it sits in the log.
public struct StoredBatch: Sendable {
    public var firstSeq: Int64
    public var lastSeq: Int64
    public var batch: Data
}

/// Pushes and pulls: a device's records written together, all or none, under its signed batch.
extension SyncStore {
    /// The ciphertext a pulled page holds at most (beyond a single batch, which devices keep under it).
    public static let pageBytes = 24 << 20

    /// Versions of a record's past kept encrypted beside it (the history a user can go back to).
    public static let historyDepth: Int64 = 5

    /// What a push came to.
    public enum PushOutcome: Sendable {
        /// Written: the first of the consecutive sequence numbers the batch took.
        case written(firstSeq: Int64)
        /// Nothing written: these records are at other versions on the server.
        case conflict([(recordID: Data, version: Int64)])
        /// Nothing written: the writer is not trusted in the account (any more).
        case writerNotTrusted
        /// Nothing written: the account would store more than its quota.
        case overQuota(limit: Int64)
        /// Nothing written: a trust view came after the one the push was checked against.
        case viewChanged
    }

    /// Writes every record of a batch by compare-and-set, in one transaction: when any record is no
    /// longer at the version it replaces, nothing is written and the conflicts are returned. The
    /// version a record leaves goes into its history; the batch takes consecutive sequence numbers.
    ///
    /// - Parameter viewEpoch: the newest trust view's epoch as the caller checked the records against
    ///   it (nil: not checked); a newer view by the time the account row is locked refuses the push.
    public func push(
        account: Data, writer: Data, batch: Data, records: [PushedRecord], viewEpoch: Int64? = nil
    ) throws(SyncStoreError) -> PushOutcome {
        for record in records { try Self.check(recordID: record.recordID, ciphertext: record.ciphertext) }
        let outcome = try retrying { () throws(SyncStoreError) -> PushOutcome? in
            try withConnection { (connection) throws(SyncStoreError) -> PushOutcome? in
                do throws(SyncStoreError) {
                    return try connection.transaction { () throws(SyncStoreError) -> PushOutcome? in
                        let sequence = try connection.run(
                            "UPDATE accounts SET last_seq = last_seq + $2 WHERE account_id = $1 RETURNING last_seq",
                            [.bytes(account), .integer(Int64(records.count))])
                        guard !sequence.values.isEmpty else { throw SyncStoreError(.statement, "no such account") }
                        // Under the account row's lock, which a removal or a recovery takes too: a
                        // writer they removed meanwhile writes nothing.
                        let standing = try connection.run(
                            "SELECT status FROM devices WHERE account_id = $1 AND device_id = $2",
                            [.bytes(account), .bytes(writer)])
                        guard !standing.values.isEmpty, try standing.integer(0, 0) == Self.trusted else {
                            throw SyncStoreError(.refused, "the writer is not trusted in the account")
                        }
                        if let viewEpoch {
                            let newest = try connection.run(
                                "SELECT coalesce(max(epoch), 0) FROM views WHERE account_id = $1", [.bytes(account)])
                            guard try newest.integer(0, 0) == viewEpoch else {
                                throw SyncStoreError(.stale, "a trust view came after the push was checked")
                            }
                        }
                        let first = try sequence.integer(0, 0) - Int64(records.count) + 1
                        // The log counts too, until compaction drops it: the batch, and a change row
                        // of each record.
                        var stored = Int64(batch.count) + Self.changeRowBytes * Int64(records.count)
                        for (offset, record) in records.enumerated() {
                            stored += try writeRecord(record, seq: first + Int64(offset), account: account, connection)
                        }
                        try checkQuota(account: account, adding: stored, connection)
                        try connection.run(
                            "INSERT INTO batches (account_id, first_seq, last_seq, writer, batch) VALUES ($1, $2, $3, $4, $5)",
                            [
                                .bytes(account), .integer(first), .integer(first + Int64(records.count) - 1),
                                .bytes(writer), .bytes(batch),
                            ])
                        try connection.run(
                            "SELECT pg_notify($1, $2)", [.text(Self.notifyChannel), .text(Hex.encode(account))])
                        return .written(firstSeq: first)
                    }
                } catch  where error.code == .conflict {
                    return nil
                } catch  where error.code == .refused {
                    return .writerNotTrusted
                } catch  where error.code == .overQuota {
                    return .overQuota(limit: limits.accountBytes)
                } catch  where error.code == .stale {
                    return .viewChanged
                }
            }
        }
        if let outcome { return outcome }
        var current: [(Data, Int64)] = []
        for record in records {
            let version = try self.record(account: account, recordID: record.recordID)?.version ?? 0
            if version != record.replacing { current.append((record.recordID, version)) }
        }
        return .conflict(current)
    }

    /// What a record must be to be stored: an id of 1 to 64 bytes, a ciphertext padded by the device to
    /// a multiple of `sizeBucket`, of at most `maximumCiphertext`.
    public static func check(recordID: Data, ciphertext: Data) throws(SyncStoreError) {
        guard !recordID.isEmpty, recordID.count <= 64 else {
            throw SyncStoreError(.statement, "a record id is 1 to 64 bytes")
        }
        guard !ciphertext.isEmpty, ciphertext.count % sizeBucket == 0, ciphertext.count <= maximumCiphertext else {
            throw SyncStoreError(
                .statement, "a ciphertext must be padded to a multiple of \(sizeBucket) bytes, at most 2 MiB")
        }
    }

    /// One record written by compare-and-set at `seq`, in the caller's transaction: the version it
    /// leaves goes into its history, and the change into the log; a stale one throws `.conflict`.
    /// - Returns: how much more the account stores (`checkQuota` adds it).
    func writeRecord(_ record: PushedRecord, seq: Int64, account: Data, _ connection: PostgresConnection)
        throws(SyncStoreError) -> Int64
    {
        let version = record.replacing + 1
        let changed: Int
        // What the account stores changes by the new ciphertext, less the history versions dropped
        // (the version replaced moves into the history, and is counted there).
        var stored = Int64(record.ciphertext.count)
        if record.replacing == 0 {
            changed = try connection.run(
                """
                INSERT INTO records (account_id, record_id, version, seq, padded_size, deleted, ciphertext)
                VALUES ($1, $2, 1, $3, $4, $5, $6) ON CONFLICT (account_id, record_id) DO NOTHING
                """,
                [
                    .bytes(account), .bytes(record.recordID), .integer(seq), .integer(Int64(record.ciphertext.count)),
                    .boolean(record.deleted), .bytes(record.ciphertext),
                ]
            ).affected
        } else {
            let moved = try connection.run(
                """
                INSERT INTO history (account_id, record_id, version, ciphertext)
                SELECT account_id, record_id, version, ciphertext FROM records
                WHERE account_id = $1 AND record_id = $2 AND version = $3
                ON CONFLICT DO NOTHING
                """, [.bytes(account), .bytes(record.recordID), .integer(record.replacing)])
            if moved.affected == 0 {
                let replaced = try connection.run(
                    "SELECT padded_size FROM records WHERE account_id = $1 AND record_id = $2 AND version = $3",
                    [.bytes(account), .bytes(record.recordID), .integer(record.replacing)])
                if !replaced.values.isEmpty { stored -= try replaced.integer(0, 0) }
            }
            changed = try connection.run(
                """
                UPDATE records SET version = version + 1, seq = $3, padded_size = $4, deleted = $5, ciphertext = $6
                WHERE account_id = $1 AND record_id = $2 AND version = $7
                """,
                [
                    .bytes(account), .bytes(record.recordID), .integer(seq), .integer(Int64(record.ciphertext.count)),
                    .boolean(record.deleted), .bytes(record.ciphertext), .integer(record.replacing),
                ]
            ).affected
            let dropped = try connection.run(
                """
                DELETE FROM history WHERE account_id = $1 AND record_id = $2 AND version <= $3
                RETURNING octet_length(ciphertext)::bigint
                """,
                [.bytes(account), .bytes(record.recordID), .integer(version - Self.historyDepth - 1)])
            for row in dropped.values.indices { stored -= try dropped.integer(row, 0) }
        }
        guard changed == 1 else { throw SyncStoreError(.conflict, "stale") }
        try connection.run(
            "INSERT INTO changes (account_id, seq, record_id, version) VALUES ($1, $2, $3, $4)",
            [.bytes(account), .integer(seq), .bytes(record.recordID), .integer(version)])
        return stored
    }

    /// What a change row counts for in an account's quota.
    static let changeRowBytes: Int64 = 64

    /// Counts what a write adds to the account, and refuses, in the caller's transaction, what takes it
    /// past its quota.
    func checkQuota(account: Data, adding stored: Int64, _ connection: PostgresConnection) throws(SyncStoreError) {
        let rows = try connection.run(
            "UPDATE accounts SET stored_bytes = stored_bytes + $2 WHERE account_id = $1 RETURNING stored_bytes",
            [.bytes(account), .integer(stored)])
        guard limits.accountBytes > 0, stored > 0 else { return }
        guard !rows.values.isEmpty, try rows.integer(0, 0) <= limits.accountBytes else {
            throw SyncStoreError(.overQuota, "the account would store more than its quota")
        }
    }

    /// What the account stores now, records and history together.
    public func storedBytes(account: Data) throws(SyncStoreError) -> Int64 {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT stored_bytes FROM accounts WHERE account_id = $1", [.bytes(account)])
            return rows.values.isEmpty ? 0 : try rows.integer(0, 0)
        }
    }

    /// Whole batches after `seq` (at least one when there is one, then as many as keep the entries at
    /// most `limit`), with the current ciphertext of every record whose latest change is among them.
    /// The page also says where the log ends, read in the same snapshot (a push committed meanwhile is
    /// in neither).
    public func pull(account: Data, after seq: Int64, limit: Int) throws(SyncStoreError) -> (
        batches: [StoredBatch], records: [SyncRecord], lastSeq: Int64, compactedThrough: Int64
    ) {
        try withConnection { (connection) throws(SyncStoreError) in
            try connection.transaction { () throws(SyncStoreError) in
                try connection.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                // Where the log ends, and where it was dropped up to (a pull from before that has no
                // whole log to read: the caller refuses it), in the same snapshot as the log.
                let end = try connection.run(
                    "SELECT last_seq, compacted_through FROM accounts WHERE account_id = $1", [.bytes(account)])
                let lastSeq = end.values.isEmpty ? 0 : try end.integer(0, 0)
                let compacted = end.values.isEmpty ? 0 : try end.integer(0, 1)
                guard seq >= compacted else { return ([], [], lastSeq, compacted) }
                let rows = try connection.run(
                    """
                    SELECT first_seq, last_seq, batch FROM batches WHERE account_id = $1 AND last_seq > $2
                    ORDER BY first_seq LIMIT 1000
                    """, [.bytes(account), .integer(seq)])
                var batches: [StoredBatch] = []
                var entries = 0
                var last = seq
                for row in rows.values.indices {
                    let first = try rows.integer(row, 0)
                    let end = try rows.integer(row, 1)
                    if !batches.isEmpty, entries + Int(end - first + 1) > limit { break }
                    batches.append(StoredBatch(firstSeq: first, lastSeq: end, batch: try rows.bytes(row, 2)))
                    entries += Int(end - first + 1)
                    last = end
                }
                guard !batches.isEmpty else { return ([], [], lastSeq, compacted) }
                // No more than about 24 MiB of ciphertext a page (a message is at most 32 MiB): batches
                // are left for the next page until it fits, down to one (which a device keeps under it).
                while true {
                    let records = try Self.records(
                        try connection.run(
                            """
                            SELECT record_id, version, seq, deleted, ciphertext FROM records
                            WHERE account_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq
                            """, [.bytes(account), .integer(seq), .integer(last)]))
                    let bytes = records.reduce(0) { $0 + $1.ciphertext.count }
                    guard bytes > Self.pageBytes, batches.count > 1 else {
                        return (batches, records, lastSeq, compacted)
                    }
                    batches.removeLast()
                    guard let previous = batches.last else { return (batches, records, lastSeq, compacted) }
                    last = previous.lastSeq
                }
            }
        }
    }

    /// The ciphertexts of a record's current version and its past ones kept, newest first.
    public func history(account: Data, recordID: Data) throws(SyncStoreError) -> [(version: Int64, ciphertext: Data)] {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                """
                SELECT version, ciphertext FROM records WHERE account_id = $1 AND record_id = $2
                UNION ALL
                SELECT version, ciphertext FROM history WHERE account_id = $1 AND record_id = $2
                ORDER BY 1 DESC
                """,
                [.bytes(account), .bytes(recordID)])
            return try rows.values.indices.map { (row) throws(SyncStoreError) in
                (try rows.integer(row, 0), try rows.bytes(row, 1))
            }
        }
    }

    /// Waits until the account's log passes `seq` or `timeout` ends, and returns its last sequence
    /// number. A NOTIFY wakes the wait early; the log, read again every second, is what decides (a
    /// notification can be missed, and CockroachDB sends none). The wait holds no database
    /// connection: the server's one LISTEN serves every long poll (`SyncWakeups`).
    public func waitForChange(account: Data, after seq: Int64, timeout: Duration) throws(SyncStoreError) -> Int64 {
        // Once from the pool, for a log that passed `seq` already; then from the shared listener.
        let last = try lastSeq(account: account)
        guard last <= seq else { return last }
        return wakeups.wait(for: Hex.encode(account), after: seq, timeout: timeout) ?? last
    }
}
