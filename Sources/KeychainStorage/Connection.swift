import CSQLite
import Foundation

/// One SQLite connection with its cache of prepared statements.
///
/// A connection is used by one thread at a time (the `ConnectionPool` hands it out), so it is opened
/// without SQLite's own mutex. All SQL it runs is static text from this module.
public final class Connection {
    private let handle: OpaquePointer
    // One thread at a time uses a connection (the pool hands it out), so the runtime's exclusivity
    // check on every statement lookup buys nothing here.
    @exclusivity(unchecked) private var statements: [String: Statement] = [:]
    public let path: String
    /// Run after every commit of `writeTransaction`: the group commit's wait for the disk.
    var afterCommit: (() throws -> Void)?
    /// Shared by the pool's connections: writers of this process queue here rather than in SQLite's busy
    /// handler, which sleeps a millisecond or more between attempts.
    var writers: WriterQueue?

    /// Opens (creating if asked) the database at `path` in WAL mode. With `.eachCommit` every commit is
    /// synced to disk; with `.grouped` the log is written at commit and `afterCommit` makes it durable.
    public init(
        path: String, create: Bool, durability: Durability = .eachCommit, busyTimeoutMilliseconds: Int32 = 10_000
    ) throws {
        var handle: OpaquePointer?
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        if create { flags |= SQLITE_OPEN_CREATE }
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let error = StorageError(code: code, connection: handle)
            sqlite3_close_v2(handle)
            throw error
        }
        self.handle = handle
        self.path = path
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        // journal_mode answers with a row; the others do not. Turning a new database to WAL needs an
        // exclusive lock, and while another connection makes the same switch SQLite answers SQLITE_BUSY
        // at once, without waiting in the busy handler: so wait here, within the same timeout.
        try retryingWhileBusy(forMilliseconds: busyTimeoutMilliseconds) { try execute("PRAGMA journal_mode = WAL") }
        try execute(durability == .eachCommit ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        try execute("PRAGMA foreign_keys = ON")
        try execute("PRAGMA secure_delete = ON")
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
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
        let statement = try Statement(connection: handle, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes64(handle)) }

    public var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Runs `body` in a write transaction taken at once (BEGIN IMMEDIATE), so two writers never both hold
    /// a read snapshot they then try to upgrade. Commits when `body` returns, rolls back when it throws.
    public func writeTransaction<T>(_ body: () throws -> T) throws -> T {
        let result = try (writers ?? WriterQueue.unshared).serialize {
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
        // Outside the queue: the next writer commits while this one waits for the disk.
        try afterCommit?()
        return result
    }

    /// The first column of the first row of static SQL.
    func integerValue(_ sql: String) throws -> Int64 {
        let statement = try self.statement(sql)
        defer { statement.reset() }
        return try statement.step() ? statement.int64(at: 0) : 0
    }

    func fileControl(_ operation: Int32, _ argument: UnsafeMutableRawPointer) -> Int32 {
        sqlite3_file_control(handle, "main", operation, argument)
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
