import FoundationEssentials

/// The item table's operations over one connection. Callers own the transaction around them.
public struct ItemStore {
    public let connection: Connection

    public init(connection: Connection) { self.connection = connection }

    private static let columns =
        "rowid, persistref, class, keyclass, agrp, sync, tomb, pk, lookup, metadata, secret"
    /// The same columns with an empty blob in place of the metadata, which can be large.
    private static let columnsWithoutMetadata =
        "rowid, persistref, class, keyclass, agrp, sync, tomb, pk, lookup, x'', secret"

    /// Creates the tables on a new database, and refuses a database written by a newer version.
    public func prepareSchema() throws {
        // Opening an existing keychain only reads: no write lock, no fsync on every start.
        if let found = try schemaVersion() {
            guard found <= Schema.version else {
                throw StorageError(
                    kind: .other, code: 0,
                    message: "database schema \(found) is newer than this build supports (\(Schema.version))")
            }
            return
        }
        try connection.writeTransaction {
            for sql in Schema.statements { try connection.execute(sql) }
            if try schemaVersion() == nil {
                let insert = try connection.statement("INSERT INTO keychain_info(name, value) VALUES ('schema', ?)")
                defer { insert.reset() }
                try insert.bind(Schema.version, at: 1)
                _ = try insert.step()
            }
        }
    }

    /// The stored schema version, or nil for a new, empty database.
    private func schemaVersion() throws -> Int64? {
        let exists = try connection.statement(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'keychain_info'")
        defer { exists.reset() }
        guard try exists.step() else { return nil }
        let select = try connection.statement("SELECT value FROM keychain_info WHERE name = 'schema'")
        defer { select.reset() }
        return try select.step() ? select.int64(at: 0) : nil
    }

    /// Inserts a row and its index entries; a duplicate primary key throws a `.constraint` error.
    @discardableResult
    public func insert(_ item: StoredItem) throws -> Int64 {
        let statement = try connection.statement(
            """
            INSERT INTO items(persistref, class, keyclass, agrp, sync, tomb, pk, lookup, metadata, secret)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        defer { statement.reset() }
        try bindRow(item, to: statement, from: 1)
        _ = try statement.step()
        let rowID = connection.lastInsertedRowID
        try insertIndex(item.indexDigests, rowID: rowID)
        return rowID
    }

    /// Rewrites a row in place (same rowid) with new contents and index entries.
    public func replace(rowID: Int64, with item: StoredItem) throws {
        let statement = try connection.statement(
            """
            UPDATE items SET persistref = ?, class = ?, keyclass = ?, agrp = ?, sync = ?, tomb = ?, pk = ?,
            lookup = ?, metadata = ?, secret = ? WHERE rowid = ?
            """)
        defer { statement.reset() }
        try bindRow(item, to: statement, from: 1)
        try statement.bind(rowID, at: 11)
        _ = try statement.step()
        let clear = try connection.statement("DELETE FROM attribute_index WHERE item = ?")
        defer { clear.reset() }
        try clear.bind(rowID, at: 1)
        _ = try clear.step()
        try insertIndex(item.indexDigests, rowID: rowID)
    }

    public func delete(rowID: Int64) throws {
        let statement = try connection.statement("DELETE FROM items WHERE rowid = ?")
        defer { statement.reset() }
        try statement.bind(rowID, at: 1)
        _ = try statement.step()
    }

    /// Deletes every item (the wipe after too many failed passcode attempts).
    public func deleteAll() throws {
        try connection.execute("DELETE FROM items")
        try connection.execute("DELETE FROM attribute_index")
    }

    /// Whether any row is stored (live items and tombstones alike).
    public func isEmpty() throws -> Bool {
        let statement = try connection.statement("SELECT 1 FROM items LIMIT 1")
        defer { statement.reset() }
        return try !statement.step()
    }

    public func item(rowID: Int64) throws -> StoredItem? {
        let statement = try connection.statement("SELECT \(Self.columns) FROM items WHERE rowid = ?")
        defer { statement.reset() }
        try statement.bind(rowID, at: 1)
        return try statement.step() ? readRow(statement) : nil
    }

    public func item(persistentID: Data) throws -> StoredItem? {
        let statement = try connection.statement("SELECT \(Self.columns) FROM items WHERE persistref = ?")
        defer { statement.reset() }
        try statement.bind(persistentID, at: 1)
        return try statement.step() ? readRow(statement) : nil
    }

    public func item(primaryKeyDigest: Data) throws -> StoredItem? {
        let statement = try connection.statement("SELECT \(Self.columns) FROM items WHERE pk = ?")
        defer { statement.reset() }
        try statement.bind(primaryKeyDigest, at: 1)
        return try statement.step() ? readRow(statement) : nil
    }

    /// Rows whose lookup digest is `digest`, in rowid order.
    /// - Parameter withMetadata: false leaves `metadata` empty, for a caller that will open only the secret.
    public func items(lookupDigest: Data, withMetadata: Bool = true) throws -> [StoredItem] {
        let statement = try connection.statement(
            withMetadata
                ? "SELECT \(Self.columns) FROM items WHERE lookup = ? ORDER BY rowid"
                : "SELECT \(Self.columnsWithoutMetadata) FROM items WHERE lookup = ? ORDER BY rowid")
        defer { statement.reset() }
        try statement.bind(lookupDigest, at: 1)
        var rows: [StoredItem] = []
        while try statement.step() { rows.append(readRow(statement)) }
        return rows
    }

    /// Row ids carrying index entry `digest`, in rowid order, at most `limit` of them.
    public func rowIDs(indexDigest: Data, limit: Int = Int.max) throws -> [Int64] {
        let statement = try connection.statement(
            "SELECT item FROM attribute_index WHERE digest = ? ORDER BY item LIMIT ?")
        defer { statement.reset() }
        try statement.bind(indexDigest, at: 1)
        try statement.bind(Int64(clamping: limit), at: 2)
        var rows: [Int64] = []
        while try statement.step() { rows.append(statement.int64(at: 0)) }
        return rows
    }

    public func hasIndexEntry(_ digest: Data, rowID: Int64) throws -> Bool {
        let statement = try connection.statement("SELECT 1 FROM attribute_index WHERE digest = ? AND item = ?")
        defer { statement.reset() }
        try statement.bind(digest, at: 1)
        try statement.bind(rowID, at: 2)
        return try statement.step()
    }

    /// Every row id, in order.
    public func allRowIDs() throws -> [Int64] {
        let statement = try connection.statement("SELECT rowid FROM items ORDER BY rowid")
        defer { statement.reset() }
        var rows: [Int64] = []
        while try statement.step() { rows.append(statement.int64(at: 0)) }
        return rows
    }

    /// Replaces a row's two blobs, leaving its clear columns and index entries as they are.
    public func replaceBlobs(rowID: Int64, metadata: Data, secret: Data) throws {
        let statement = try connection.statement("UPDATE items SET metadata = ?, secret = ? WHERE rowid = ?")
        defer { statement.reset() }
        try statement.bind(metadata, at: 1)
        try statement.bind(secret, at: 2)
        try statement.bind(rowID, at: 3)
        _ = try statement.step()
    }

    /// A number the keychain keeps beside its items under `name` (never the schema's); nil when unset.
    public func mark(_ name: Mark) throws -> Int64? {
        let statement = try connection.statement("SELECT value FROM keychain_info WHERE name = ?")
        defer { statement.reset() }
        try statement.bind(name.rawValue, at: 1)
        return try statement.step() ? statement.int64(at: 0) : nil
    }

    /// Sets (or, with nil, removes) the mark `name`; in the caller's transaction, so it commits or not
    /// with the rows it describes.
    public func setMark(_ name: Mark, to value: Int64?) throws {
        let statement = try connection.statement(
            value == nil
                ? "DELETE FROM keychain_info WHERE name = ?"
                : "INSERT OR REPLACE INTO keychain_info(name, value) VALUES (?, ?)")
        defer { statement.reset() }
        try statement.bind(name.rawValue, at: 1)
        if let value { try statement.bind(value, at: 2) }
        _ = try statement.step()
    }

    /// The marks kept in `keychain_info`.
    public enum Mark: String, Sendable {
        /// Set in the transaction that moved every item to a migrating keybag's class keys: that
        /// keybag is the one to finish moving into place (`Keychain.migrateDeviceRoot`).
        case itemsMigrated = "items-migrated"
    }

    /// Row ids of one item class, live items or tombstones, in rowid order.
    public func rowIDs(itemClass: Int, tombstone: Bool) throws -> [Int64] {
        let statement = try connection.statement(
            "SELECT rowid FROM items WHERE class = ? AND tomb = ? ORDER BY rowid")
        defer { statement.reset() }
        try statement.bind(Int64(itemClass), at: 1)
        try statement.bind(tombstone ? 1 : 0, at: 2)
        var rows: [Int64] = []
        while try statement.step() { rows.append(statement.int64(at: 0)) }
        return rows
    }

    /// How many rows of one item class there are, live items or tombstones.
    public func count(itemClass: Int, tombstone: Bool) throws -> Int {
        let statement = try connection.statement("SELECT count(*) FROM items WHERE class = ? AND tomb = ?")
        defer { statement.reset() }
        try statement.bind(Int64(itemClass), at: 1)
        try statement.bind(tombstone ? 1 : 0, at: 2)
        return try statement.step() ? Int(statement.int64(at: 0)) : 0
    }

    /// Every row of one item class, live items or tombstones, in rowid order, handed to `body` one at a
    /// time: a whole keychain is never held in memory (a backup streams through this).
    public func forEachItem(itemClass: Int, tombstone: Bool, _ body: (StoredItem) throws -> Void) throws {
        let statement = try connection.statement(
            "SELECT \(Self.columns) FROM items WHERE class = ? AND tomb = ? ORDER BY rowid")
        defer { statement.reset() }
        try statement.bind(Int64(itemClass), at: 1)
        try statement.bind(tombstone ? 1 : 0, at: 2)
        while try statement.step() { try body(readRow(statement)) }
    }

    /// Deletes every row that is not synchronizable, except those of `keptProtectionClass` and of
    /// `keptItemClass` (which the caller decides row by row): what a restore replaces. Returns how many
    /// live items (not tombstones) went.
    ///
    /// Rows whose secret blob starts with one of `keptSecretFormats` (its format byte) are left too, for
    /// the caller to decide one by one (`forEachUnsynchronizedItem(secretFormats:)`).
    @discardableResult
    public func deleteUnsynchronized(
        exceptProtectionClass keptProtectionClass: Int, exceptItemClass keptItemClass: Int,
        exceptSecretFormats keptSecretFormats: [UInt8] = []
    ) throws -> Int {
        // The formats as a blob of one byte each: `instr` finds the row's first byte among them.
        let formats = Data(keptSecretFormats.isEmpty ? [0] : keptSecretFormats)
        let condition = "sync = 0 AND keyclass != ? AND class != ? AND instr(?, substr(secret, 1, 1)) = 0"
        let counting = try connection.statement("SELECT count(*) FROM items WHERE tomb = 0 AND \(condition)")
        defer { counting.reset() }
        try counting.bind(Int64(keptProtectionClass), at: 1)
        try counting.bind(Int64(keptItemClass), at: 2)
        try counting.bind(formats, at: 3)
        let live = try counting.step() ? Int(counting.int64(at: 0)) : 0
        let statement = try connection.statement("DELETE FROM items WHERE \(condition)")
        defer { statement.reset() }
        try statement.bind(Int64(keptProtectionClass), at: 1)
        try statement.bind(Int64(keptItemClass), at: 2)
        try statement.bind(formats, at: 3)
        _ = try statement.step()
        return live
    }

    /// Every row that is not synchronizable whose secret blob starts with one of `secretFormats`.
    /// Every synchronizable row, live or tombstone, with its protection class among `protectionClasses`.
    public func forEachSynchronizedItem(protectionClasses: [Int], _ body: (StoredItem) throws -> Void) throws {
        let statement = try connection.statement(
            "SELECT \(Self.columns) FROM items WHERE sync = 1 AND instr(?, char(keyclass)) > 0 ORDER BY rowid")
        defer { statement.reset() }
        try statement.bind(String(protectionClasses.compactMap { UnicodeScalar($0).map(Character.init) }), at: 1)
        while try statement.step() { try body(readRow(statement)) }
    }

    public func forEachUnsynchronizedItem(secretFormats: [UInt8], _ body: (StoredItem) throws -> Void) throws {
        let statement = try connection.statement(
            "SELECT \(Self.columns) FROM items WHERE sync = 0 AND instr(?, substr(secret, 1, 1)) > 0 ORDER BY rowid")
        defer { statement.reset() }
        try statement.bind(Data(secretFormats.isEmpty ? [0] : secretFormats), at: 1)
        while try statement.step() { try body(readRow(statement)) }
    }

    /// Deletes every row of a protection class (used when that class's key is destroyed).
    @discardableResult
    public func deleteAll(protectionClass: Int) throws -> Int {
        let statement = try connection.statement("DELETE FROM items WHERE keyclass = ?")
        defer { statement.reset() }
        try statement.bind(Int64(protectionClass), at: 1)
        _ = try statement.step()
        return connection.changes
    }

    /// The index entries of a row (the keyed digests of its searchable attributes), which `forEachItem`
    /// and the other row reads leave out: what a copy of the row needs besides its columns.
    public func indexDigests(rowID: Int64) throws -> [Data] {
        let statement = try connection.statement("SELECT digest FROM attribute_index WHERE item = ?")
        defer { statement.reset() }
        try statement.bind(rowID, at: 1)
        var digests: [Data] = []
        while try statement.step() { digests.append(statement.data(at: 0) ?? Data()) }
        return digests
    }

    private func insertIndex(_ digests: [Data], rowID: Int64) throws {
        let statement = try connection.statement(
            "INSERT OR IGNORE INTO attribute_index(digest, item) VALUES (?, ?)")
        defer { statement.reset() }
        for digest in digests {
            statement.reset()
            try statement.bind(digest, at: 1)
            try statement.bind(rowID, at: 2)
            _ = try statement.step()
        }
    }

    private func bindRow(_ item: StoredItem, to statement: Statement, from first: Int32) throws {
        try statement.bind(item.persistentID, at: first)
        try statement.bind(Int64(item.itemClass), at: first + 1)
        try statement.bind(Int64(item.protectionClass), at: first + 2)
        try statement.bind(item.accessGroupDigest, at: first + 3)
        try statement.bind(item.synchronizable ? 1 : 0, at: first + 4)
        try statement.bind(item.tombstone ? 1 : 0, at: first + 5)
        try statement.bind(item.primaryKeyDigest, at: first + 6)
        try statement.bind(item.lookupDigest, at: first + 7)
        try statement.bind(item.metadata, at: first + 8)
        try statement.bind(item.secret, at: first + 9)
    }

    private func readRow(_ statement: Statement) -> StoredItem {
        StoredItem(
            rowID: statement.int64(at: 0),
            persistentID: statement.data(at: 1) ?? Data(),
            itemClass: Int(statement.int64(at: 2)),
            protectionClass: Int(statement.int64(at: 3)),
            accessGroupDigest: statement.data(at: 4) ?? Data(),
            synchronizable: statement.int64(at: 5) != 0,
            tombstone: statement.int64(at: 6) != 0,
            primaryKeyDigest: statement.data(at: 7) ?? Data(),
            lookupDigest: statement.data(at: 8) ?? Data(),
            metadata: statement.data(at: 9) ?? Data(),
            secret: statement.data(at: 10) ?? Data())
    }
}
