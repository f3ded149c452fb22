import CSQLite
import Dispatch
import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// One SQLite connection with its cache of prepared statements.
///
/// A connection is used by one thread at a time (the `ConnectionPool` hands it out), so it is opened
/// without SQLite's own mutex. All SQL it runs is static text from this module.
public final class Connection {
    private let handle: OpaquePointer
    private let sqlite: keychain_sqlite
    // One thread at a time uses a connection (the pool hands it out), so the runtime's exclusivity
    // check on every statement lookup buys nothing here.
    @exclusivity(unchecked) private var statements: [String: Statement] = [:]
    public let path: String

    /// Opens (creating if asked) the database at `path` in WAL mode with full fsync on commit,
    /// so a transaction that returned is on disk.
    public init(path: String, create: Bool, busyTimeoutMilliseconds: Int32 = 10_000) throws {
        let sqlite = try sqliteLibrary.get()
        var handle: OpaquePointer?
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        if create { flags |= SQLITE_OPEN_CREATE }
        let code = sqlite.sqlite3_open_v2?(path, &handle, flags, nil) ?? SQLITE_CANTOPEN
        guard code == SQLITE_OK, let handle else {
            let error = StorageError(code: code, connection: handle)
            _ = sqlite.sqlite3_close_v2?(handle)
            throw error
        }
        self.handle = handle
        self.sqlite = sqlite
        self.path = path
        _ = sqlite.sqlite3_extended_result_codes?(handle, 1)
        _ = sqlite.sqlite3_busy_timeout?(handle, busyTimeoutMilliseconds)
        // journal_mode answers with a row; the others do not. Turning a new database to WAL needs an
        // exclusive lock, and while another connection makes the same switch SQLite answers SQLITE_BUSY
        // at once, without waiting in the busy handler: so wait here, within the same timeout.
        try retryingWhileBusy(forMilliseconds: busyTimeoutMilliseconds) { try execute("PRAGMA journal_mode = WAL") }
        try execute("PRAGMA synchronous = FULL")
        try execute("PRAGMA foreign_keys = ON")
        try execute("PRAGMA secure_delete = ON")
    }

    deinit {
        statements.removeAll()
        _ = sqlite.sqlite3_close_v2?(handle)
    }

    private func retryingWhileBusy(forMilliseconds timeout: Int32, _ body: () throws -> Void) throws {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(timeout, 0)) * 1_000_000
        while true {
            do {
                return try body()
            } catch let error as StorageError
                where error.kind == .busy && DispatchTime.now().uptimeNanoseconds < deadline
            {
                usleep(1_000)
            }
        }
    }

    /// Runs static SQL that binds nothing, draining any rows it yields.
    public func execute(_ sql: String) throws {
        let statement = try self.statement(sql)
        defer { statement.reset() }
        while try statement.step() {}
    }

    /// The cached statement for `sql`, reset and ready for binding.
    public func statement(_ sql: String) throws -> Statement {
        if let cached = statements[sql] {
            cached.reset()
            return cached
        }
        let statement = try Statement(connection: handle, sqlite: sqlite, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite.sqlite3_changes64?(handle) ?? 0) }

    public var lastInsertedRowID: Int64 { sqlite.sqlite3_last_insert_rowid?(handle) ?? 0 }

    /// Whether a transaction is open: false once SQLite has rolled one back by itself (a full disk,
    /// an I/O error, no memory), after which its savepoints are gone too.
    public var isInTransaction: Bool { sqlite.sqlite3_get_autocommit?(handle) == 0 }

    /// Runs `body` in a write transaction taken at once (BEGIN IMMEDIATE), so two writers never both hold
    /// a read snapshot they then try to upgrade. Commits when `body` returns, rolls back when it throws.
    public func writeTransaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Result of `PRAGMA integrity_check`: "ok" or the problems found.
    public func integrityCheck() throws -> [String] {
        let statement = try self.statement("PRAGMA integrity_check")
        defer { statement.reset() }
        var lines: [String] = []
        while try statement.step() { lines.append(statement.text(at: 0) ?? "") }
        return lines
    }
}
