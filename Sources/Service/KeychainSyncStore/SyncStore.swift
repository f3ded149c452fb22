import Foundation
import KeychainBytes
import Synchronization

/// A record as the server keeps it: opaque to it, but for its id, version and place in the change log.
public struct SyncRecord: Sendable, Equatable {
    /// Random or keyed by the device: the server cannot tell what it names.
    public var recordID: Data
    /// 1 when created; each accepted write adds one. A write names the version it replaces.
    public var version: Int64
    /// Where its last change sits in the account's change log.
    public var seq: Int64
    /// A tombstone: the record was deleted (its ciphertext says when, to the devices).
    public var deleted: Bool
    /// Encrypted by the devices, padded by them to a multiple of `SyncStore.sizeBucket`.
    public var ciphertext: Data

    public init(recordID: Data, version: Int64, seq: Int64, deleted: Bool, ciphertext: Data) {
        self.recordID = recordID
        self.version = version
        self.seq = seq
        self.deleted = deleted
        self.ciphertext = ciphertext
    }
}

/// The sync server's storage on PostgreSQL: accounts, records written by compare-and-set on their
/// version, and a durable per-account change log that devices read from a cursor. Stateless beyond
/// the database, so several servers may share one. Thread-safe: connections come from a pool.
/// What the server lets one account, and anyone who can reach it, take.
public struct SyncLimits: Sendable {
    /// The ciphertext one account stores, records and their history together (0: no quota).
    public var accountBytes: Int64
    /// New accounts made on the database in an hour, by everyone (0: no limit).
    public var newAccountsPerHour: Int64
    /// Devices of one account that wait for approval at once.
    public var waitingDevices: Int64

    public init(accountBytes: Int64 = 256 << 20, newAccountsPerHour: Int64 = 60, waitingDevices: Int64 = 16) {
        self.accountBytes = accountBytes
        self.newAccountsPerHour = newAccountsPerHour
        self.waitingDevices = waitingDevices
    }
}

public final class SyncStore: Sendable {
    /// Ciphertexts are padded by the devices to a multiple of this, so that sizes tell little.
    public static let sizeBucket = 256
    /// The largest ciphertext one record may have.
    public static let maximumCiphertext = 2 << 20
    /// A server's NOTIFY channel: the payload is the account id in hex, a wake-up only.
    public static let notifyChannel = "keychain_sync"

    let conninfo: String
    /// What one account, and strangers, may take of the server.
    public let limits: SyncLimits
    private let idle = Mutex<[PostgresConnection]>([])
    /// The one LISTEN every long poll of this server shares.
    let wakeups: SyncWakeups

    /// Connects to the database at `conninfo` (a libpq connection string or URI) and brings its schema
    /// up to date, one migration per transaction, serialized with any other server doing the same.
    public init(conninfo: String, limits: SyncLimits = SyncLimits()) throws(SyncStoreError) {
        self.conninfo = conninfo
        self.limits = limits
        wakeups = SyncWakeups(conninfo: conninfo)
        try withConnection { (connection) throws(SyncStoreError) in try Self.migrate(connection) }
    }

    private static func migrate(_ connection: PostgresConnection) throws(SyncStoreError) {
        try connection.run(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version bigint PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in Migrations.all {
            try connection.transaction { () throws(SyncStoreError) in
                // One server migrates at a time; the others wait, then find it done.
                try connection.run("SELECT pg_advisory_xact_lock(7468716101)")
                let done = try connection.run(
                    "SELECT 1 FROM schema_migrations WHERE version = $1", [.integer(migration.version)])
                guard done.values.isEmpty else { return }
                try connection.runScript(migration.sql)
                try connection.run("INSERT INTO schema_migrations (version) VALUES ($1)", [.integer(migration.version)])
            }
        }
    }

    /// The migrations this database has had.
    public func appliedMigrations() throws(SyncStoreError) -> [Int64] {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run("SELECT version FROM schema_migrations ORDER BY version")
            return try rows.values.indices.map { (row) throws(SyncStoreError) in try rows.integer(row, 0) }
        }
    }

    func withConnection<T>(_ body: (PostgresConnection) throws(SyncStoreError) -> T) throws(SyncStoreError)
        -> T
    {
        // A pooled connection may have died with its server (a restart): such a failure is tried once
        // more on a new connection.
        if let pooled = idle.withLock({ $0.popLast() }) {
            do {
                return try use(pooled, body)
            } catch  where error.code == .connection {
                idle.withLock { $0.removeAll() }
            }
        }
        return try use(try PostgresConnection(conninfo), body)
    }

    private func use<T>(_ connection: PostgresConnection, _ body: (PostgresConnection) throws(SyncStoreError) -> T)
        throws(SyncStoreError) -> T
    {
        do {
            let value = try body(connection)
            idle.withLock { if $0.count < 16 { $0.append(connection) } }
            return value
        } catch {
            // A connection that failed may be broken: it is not reused.
            if error.code != .connection { idle.withLock { if $0.count < 16 { $0.append(connection) } } }
            throw error
        }
    }

    /// Runs a transaction again when PostgreSQL (or a distributed engine with serializable isolation)
    /// asks for a retry.
    func retrying<T>(_ body: () throws(SyncStoreError) -> T) throws(SyncStoreError) -> T {
        var attempt = 0
        while true {
            do { return try body() } catch  where error.isRetryable && attempt < 5 { attempt += 1 }
        }
    }

    /// Makes the account if it does not exist.
    public func createAccount(_ account: Data) throws(SyncStoreError) {
        try withConnection { (connection) throws(SyncStoreError) in
            _ = try connection.run(
                "INSERT INTO accounts (account_id) VALUES ($1) ON CONFLICT (account_id) DO NOTHING", [.bytes(account)])
        }
    }

    /// Writes a record if its version is still `replacing` (0: the record must not exist yet): a
    /// compare-and-set, so a stale write is a `.conflict` (naming the current version), never a silent
    /// overwrite. Returns the record as stored, with its new version and sequence number.
    public func write(
        account: Data, recordID: Data, replacing expected: Int64, deleted: Bool = false, ciphertext: Data
    ) throws(SyncStoreError) -> SyncRecord {
        try Self.check(recordID: recordID, ciphertext: ciphertext)
        do {
            return try retrying { () throws(SyncStoreError) in
                try withConnection { (connection) throws(SyncStoreError) in
                    let written = try connection.transaction { () throws(SyncStoreError) -> SyncRecord? in
                        let sequence = try connection.run(
                            "UPDATE accounts SET last_seq = last_seq + 1 WHERE account_id = $1 RETURNING last_seq",
                            [.bytes(account)])
                        guard !sequence.values.isEmpty else { throw SyncStoreError(.statement, "no such account") }
                        let seq = try sequence.integer(0, 0)
                        let version = expected + 1
                        let stored = try writeRecord(
                            PushedRecord(
                                recordID: recordID, replacing: expected, deleted: deleted, ciphertext: ciphertext),
                            seq: seq, account: account, connection)
                        try checkQuota(account: account, adding: stored + Self.changeRowBytes, connection)
                        try connection.run(
                            "SELECT pg_notify($1, $2)", [.text(Self.notifyChannel), .text(Hex.encode(account))])
                        return SyncRecord(
                            recordID: recordID, version: version, seq: seq, deleted: deleted, ciphertext: ciphertext)
                    }
                    guard let written else { throw SyncStoreError(.malformed, "no record") }
                    return written
                }
            }
        } catch  where error.code == .conflict {
            let current = try record(account: account, recordID: recordID)?.version ?? 0
            throw SyncStoreError(
                .conflict, "the record is at version \(current), not \(expected): read it again and re-apply")
        }
    }

    /// The record as it is now, or nil.
    public func record(account: Data, recordID: Data) throws(SyncStoreError) -> SyncRecord? {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT record_id, version, seq, deleted, ciphertext FROM records WHERE account_id = $1 AND record_id = $2",
                [.bytes(account), .bytes(recordID)])
            return try Self.records(rows).first
        }
    }

    /// The records changed after `seq`, as they are now, in the order of their last change; at most
    /// `limit`. A device asks again from the last one's `seq` until it gets none.
    public func changes(account: Data, after seq: Int64, limit: Int = 1_000) throws(SyncStoreError) -> [SyncRecord] {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                """
                SELECT record_id, version, seq, deleted, ciphertext FROM records
                WHERE account_id = $1 AND seq > $2 ORDER BY seq LIMIT $3
                """,
                [.bytes(account), .integer(seq), .integer(Int64(max(1, min(limit, 10_000))))])
            return try Self.records(rows)
        }
    }

    /// Where a device has read the account's log up to.
    public func cursor(account: Data, device: Data) throws(SyncStoreError) -> Int64 {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT seq FROM cursors WHERE account_id = $1 AND device_id = $2", [.bytes(account), .bytes(device)])
            return rows.values.isEmpty ? 0 : try rows.integer(0, 0)
        }
    }

    /// Records that a device has read up to `seq` (a cursor only moves forward).
    /// Sets how far a device has read to where it asks from now: a device that starts again (enrolled
    /// anew) reads from further back, and compaction must not pass it.
    public func setCursor(account: Data, device: Data, to seq: Int64) throws(SyncStoreError) {
        _ = try withConnection { (connection) throws(SyncStoreError) in
            try connection.run(
                """
                INSERT INTO cursors (account_id, device_id, seq) VALUES ($1, $2, $3)
                ON CONFLICT (account_id, device_id) DO UPDATE SET seq = EXCLUDED.seq
                """,
                [.bytes(account), .bytes(device), .integer(seq)])
        }
    }

    public func advanceCursor(account: Data, device: Data, to seq: Int64) throws(SyncStoreError) {
        _ = try withConnection { (connection) throws(SyncStoreError) in
            try connection.run(
                """
                INSERT INTO cursors (account_id, device_id, seq) VALUES ($1, $2, $3)
                ON CONFLICT (account_id, device_id) DO UPDATE SET seq = GREATEST(cursors.seq, EXCLUDED.seq)
                """,
                [.bytes(account), .bytes(device), .integer(seq)])
        }
    }

    static func records(_ rows: PostgresConnection.Rows) throws(SyncStoreError) -> [SyncRecord] {
        try rows.values.indices.map { (row) throws(SyncStoreError) in
            SyncRecord(
                recordID: try rows.bytes(row, 0), version: try rows.integer(row, 1), seq: try rows.integer(row, 2),
                deleted: try rows.boolean(row, 3), ciphertext: try rows.bytes(row, 4))
        }
    }
}
