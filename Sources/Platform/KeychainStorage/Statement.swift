import CSQLite
import FoundationEssentials

/// A prepared statement, reused across calls: the connection keeps one per SQL text.
///
/// Values are always bound, never spliced into SQL, so no input ever becomes SQL.
public final class Statement {
    let handle: OpaquePointer
    private let connection: OpaquePointer
    private let sqlite: keychain_sqlite

    init(connection: OpaquePointer, sqlite: keychain_sqlite, sql: String) throws {
        var handle: OpaquePointer?
        let code =
            sqlite.sqlite3_prepare_v3?(connection, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
            ?? SQLITE_MISUSE
        guard code == SQLITE_OK, let handle else {
            throw StorageError(code: code, connection: connection)
        }
        self.handle = handle
        self.connection = connection
        self.sqlite = sqlite
    }

    deinit { _ = sqlite.sqlite3_finalize?(handle) }

    /// Clears bindings and resets for the next use. Bound blobs are copied by SQLite (`SQLITE_TRANSIENT`),
    /// so nothing the caller owns is referenced after a call returns.
    public func reset() {
        _ = sqlite.sqlite3_reset?(handle)
        _ = sqlite.sqlite3_clear_bindings?(handle)
    }

    public func bind(_ value: Int64, at index: Int32) throws {
        try check(sqlite.sqlite3_bind_int64?(handle, index, value) ?? SQLITE_MISUSE)
    }

    public func bind(_ value: Data?, at index: Int32) throws {
        guard let value else {
            try check(sqlite.sqlite3_bind_null?(handle, index) ?? SQLITE_MISUSE)
            return
        }
        let code = value.withUnsafeBytes { bytes in
            // A zero-length blob needs a non-null pointer to be stored as an empty blob rather than NULL.
            sqlite.sqlite3_bind_blob64?(
                handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(bytes.count),
                csqlite_transient()) ?? SQLITE_MISUSE
        }
        try check(code)
    }

    public func bind(_ value: String, at index: Int32) throws {
        try check(sqlite.sqlite3_bind_text?(handle, index, value, -1, csqlite_transient()) ?? SQLITE_MISUSE)
    }

    /// Steps once; `true` when a row is available.
    public func step() throws -> Bool {
        let code = sqlite.sqlite3_step?(handle) ?? SQLITE_MISUSE
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw StorageError(code: code, connection: connection)
        }
    }

    public func int64(at column: Int32) -> Int64 { sqlite.sqlite3_column_int64?(handle, column) ?? 0 }

    public func isNull(at column: Int32) -> Bool {
        (sqlite.sqlite3_column_type?(handle, column) ?? SQLITE_NULL) == SQLITE_NULL
    }

    public func data(at column: Int32) -> Data? {
        guard !isNull(at: column) else { return nil }
        let count = Int(sqlite.sqlite3_column_bytes?(handle, column) ?? 0)
        guard count > 0, let pointer = sqlite.sqlite3_column_blob?(handle, column) else { return Data() }
        return Data(bytes: pointer, count: count)
    }

    public func text(at column: Int32) -> String? {
        guard let pointer = sqlite.sqlite3_column_text?(handle, column) else { return nil }
        return String(cString: pointer)
    }

    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else { throw StorageError(code: code, connection: connection) }
    }
}
