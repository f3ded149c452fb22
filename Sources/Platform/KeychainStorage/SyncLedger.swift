import FoundationEssentials

/// What a keychain remembers of its sync, in its own database so that applying what a pull brought
/// and remembering it are one transaction: nothing is applied twice or half.
///
/// - `sync_mirror`: each record this device knows, at the version it last saw on the server, with a
///   keyed digest of the item as it was then (to tell a local change) and its primary-key digest.
/// - `sync_state`: named values (the cursor, the server, sealed keys).
/// - `sync_chain`: the hash chain over the account's log at each sequence number this device passed,
///   to compare with what the other devices signed.
///
/// - `sync_dirty`: the persistent references of synchronizable rows written since sync last looked,
///   kept by triggers on the item table (installed by `track`), so that a sync examines what changed
///   rather than every item.
///
/// Record ids are random; versions, digests and hashes say nothing of an item's content.
public struct SyncLedger {
    public let connection: Connection

    public init(connection: Connection) { self.connection = connection }

    public struct Entry: Sendable, Equatable {
        public var recordID: Data
        public var version: Int64
        public var deleted: Bool
        /// The zone key generation its ciphertext on the server is sealed under.
        public var generation: Int64
        /// Keyed digest of the item's payload when last in step with the server.
        public var digest: Data
        public var ciphertextHash: Data
        public var primaryKey: Data
        /// Where in the account's log this version sits (0: not known).
        public var seq: Int64

        public init(
            recordID: Data, version: Int64, deleted: Bool, generation: Int64, digest: Data, ciphertextHash: Data,
            primaryKey: Data, seq: Int64 = 0
        ) {
            self.recordID = recordID
            self.version = version
            self.deleted = deleted
            self.generation = generation
            self.digest = digest
            self.ciphertextHash = ciphertextHash
            self.primaryKey = primaryKey
            self.seq = seq
        }
    }

    /// Creates the tables when this keychain has never synced (older keychains lack them).
    public func prepare() throws {
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS sync_mirror(
                record_id BLOB PRIMARY KEY NOT NULL,
                version INTEGER NOT NULL,
                deleted INTEGER NOT NULL,
                generation INTEGER NOT NULL,
                digest BLOB NOT NULL,
                ciphertext_hash BLOB NOT NULL,
                pk BLOB NOT NULL,
                seq INTEGER NOT NULL DEFAULT 0)
            """)
        try connection.execute(
            "CREATE TABLE IF NOT EXISTS sync_state(name TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL)")
        try connection.execute(
            "CREATE TABLE IF NOT EXISTS sync_chain(seq INTEGER PRIMARY KEY NOT NULL, chain BLOB NOT NULL)")
        try connection.execute(
            "CREATE TABLE IF NOT EXISTS sync_dirty(persistref BLOB PRIMARY KEY NOT NULL) WITHOUT ROWID")
    }

    /// Installs the triggers that note every write of a synchronizable row (an enrolled keychain's).
    public func track() throws {
        try connection.execute(
            """
            CREATE TRIGGER IF NOT EXISTS sync_dirty_insert AFTER INSERT ON items WHEN new.sync = 1 BEGIN
                INSERT OR IGNORE INTO sync_dirty(persistref) VALUES (new.persistref);
            END
            """)
        try connection.execute(
            """
            CREATE TRIGGER IF NOT EXISTS sync_dirty_update AFTER UPDATE ON items WHEN new.sync = 1 OR old.sync = 1 BEGIN
                INSERT OR IGNORE INTO sync_dirty(persistref) VALUES (old.persistref);
                INSERT OR IGNORE INTO sync_dirty(persistref) VALUES (new.persistref);
            END
            """)
        try connection.execute(
            """
            CREATE TRIGGER IF NOT EXISTS sync_dirty_delete AFTER DELETE ON items WHEN old.sync = 1 BEGIN
                INSERT OR IGNORE INTO sync_dirty(persistref) VALUES (old.persistref);
            END
            """)
    }

    /// Removes the triggers (a keychain leaving its account).
    public func untrack() throws {
        for name in ["sync_dirty_insert", "sync_dirty_update", "sync_dirty_delete"] {
            try connection.execute("DROP TRIGGER IF EXISTS \(name)")
        }
    }

    /// The rows written since sync last looked.
    public func dirty() throws -> [Data] {
        let statement = try connection.statement("SELECT persistref FROM sync_dirty")
        defer { statement.reset() }
        var result: [Data] = []
        while try statement.step() { result.append(statement.data(at: 0) ?? Data()) }
        return result
    }

    /// Marks a row for sync to look at again.
    public func markDirty(_ persistentID: Data) throws {
        let statement = try connection.statement("INSERT OR IGNORE INTO sync_dirty(persistref) VALUES (?)")
        defer { statement.reset() }
        try statement.bind(persistentID, at: 1)
        _ = try statement.step()
    }

    /// Sync has taken in this row's write.
    public func clean(_ persistentID: Data) throws {
        let statement = try connection.statement("DELETE FROM sync_dirty WHERE persistref = ?")
        defer { statement.reset() }
        try statement.bind(persistentID, at: 1)
        _ = try statement.step()
    }

    public func entry(_ recordID: Data) throws -> Entry? {
        let statement = try connection.statement(
            "SELECT record_id, version, deleted, generation, digest, ciphertext_hash, pk, seq FROM sync_mirror WHERE record_id = ?"
        )
        defer { statement.reset() }
        try statement.bind(recordID, at: 1)
        return try statement.step() ? Self.entry(statement) : nil
    }

    public func entries() throws -> [Entry] {
        let statement = try connection.statement(
            "SELECT record_id, version, deleted, generation, digest, ciphertext_hash, pk, seq FROM sync_mirror ORDER BY record_id"
        )
        defer { statement.reset() }
        var result: [Entry] = []
        while try statement.step() { result.append(Self.entry(statement)) }
        return result
    }

    private static func entry(_ statement: Statement) -> Entry {
        Entry(
            recordID: statement.data(at: 0) ?? Data(), version: statement.int64(at: 1),
            deleted: statement.int64(at: 2) != 0,
            generation: statement.int64(at: 3), digest: statement.data(at: 4) ?? Data(),
            ciphertextHash: statement.data(at: 5) ?? Data(), primaryKey: statement.data(at: 6) ?? Data(),
            seq: statement.int64(at: 7))
    }

    public func put(_ entry: Entry) throws {
        let statement = try connection.statement(
            """
            INSERT OR REPLACE INTO sync_mirror(record_id, version, deleted, generation, digest, ciphertext_hash, pk, seq)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """)
        defer { statement.reset() }
        try statement.bind(entry.recordID, at: 1)
        try statement.bind(entry.version, at: 2)
        try statement.bind(entry.deleted ? 1 : 0, at: 3)
        try statement.bind(entry.generation, at: 4)
        try statement.bind(entry.digest, at: 5)
        try statement.bind(entry.ciphertextHash, at: 6)
        try statement.bind(entry.primaryKey, at: 7)
        try statement.bind(entry.seq, at: 8)
        _ = try statement.step()
    }

    public func value(_ name: String) throws -> Data? {
        let statement = try connection.statement("SELECT value FROM sync_state WHERE name = ?")
        defer { statement.reset() }
        try statement.bind(name, at: 1)
        return try statement.step() ? statement.data(at: 0) ?? Data() : nil
    }

    public func setValue(_ name: String, _ value: Data?) throws {
        let statement = try connection.statement(
            value == nil
                ? "DELETE FROM sync_state WHERE name = ?"
                : "INSERT OR REPLACE INTO sync_state(name, value) VALUES (?, ?)")
        defer { statement.reset() }
        try statement.bind(name, at: 1)
        if let value { try statement.bind(value, at: 2) }
        _ = try statement.step()
    }

    /// The names of the values that start with `prefix`.
    public func names(withPrefix prefix: String) throws -> [String] {
        let statement = try connection.statement("SELECT name FROM sync_state WHERE substr(name, 1, ?) = ?")
        defer { statement.reset() }
        try statement.bind(Int64(prefix.utf8.count), at: 1)
        try statement.bind(prefix, at: 2)
        var result: [String] = []
        while try statement.step() { if let name = statement.text(at: 0) { result.append(name) } }
        return result
    }

    public func chain(at seq: Int64) throws -> Data? {
        let statement = try connection.statement("SELECT chain FROM sync_chain WHERE seq = ?")
        defer { statement.reset() }
        try statement.bind(seq, at: 1)
        return try statement.step() ? statement.data(at: 0) : nil
    }

    public func setChain(_ chain: Data, at seq: Int64) throws {
        let statement = try connection.statement("INSERT OR REPLACE INTO sync_chain(seq, chain) VALUES (?, ?)")
        defer { statement.reset() }
        try statement.bind(seq, at: 1)
        try statement.bind(chain, at: 2)
        _ = try statement.step()
    }

    /// Forgets everything of the sync (a device leaving its account); the items stay.
    public func erase() throws {
        try connection.execute("DELETE FROM sync_mirror")
        try connection.execute("DELETE FROM sync_state")
        try connection.execute("DELETE FROM sync_chain")
        try connection.execute("DELETE FROM sync_dirty")
    }
}
