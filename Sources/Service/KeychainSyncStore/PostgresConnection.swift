import CPostgreSQL
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Why a database exchange failed: a code to compare, the server's SQLSTATE when it gave one, and a
/// reason for people.
public struct SyncStoreError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable, Equatable {
        /// The server could not be reached, or the connection broke.
        case connection
        /// A statement failed (`state` says how).
        case statement
        /// A write named a version that is no longer the record's: the server's version won.
        case conflict
        /// A result was not what the schema promises.
        case malformed
        /// The account's state refuses the write (its writer is not trusted now).
        case refused
        /// The write would take the account past its quota.
        case overQuota
        /// What the write was checked against changed before it could be made.
        case stale
    }

    public let code: Code
    /// The SQLSTATE (`40001` for a serialization failure, which a retry cures).
    public let state: String?
    public let reason: String

    public init(_ code: Code, _ reason: String, state: String? = nil) {
        self.code = code
        self.reason = reason
        self.state = state
    }

    public var description: String { reason }

    /// A serialization failure or a deadlock: the transaction may be run again as it was.
    public var isRetryable: Bool { state == "40001" || state == "40P01" }
}

/// One connection to PostgreSQL through libpq. Every statement is sent with its values as separate
/// binary parameters (`PQexecParams`): no SQL is ever built from input. A connection is used by one
/// thread at a time (the store keeps a pool).
// Unchecked: the pool hands a connection to one thread at a time, and takes it back after.
final class PostgresConnection: @unchecked Sendable {
    private let handle: OpaquePointer

    /// Connects with a libpq connection string or URI (`host=/run/postgresql dbname=sync`,
    /// `postgresql://…`).
    init(_ conninfo: String) throws(SyncStoreError) {
        guard let handle = PQconnectdb(conninfo) else {
            throw SyncStoreError(.connection, "libpq could not allocate a connection")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let reason = Self.message(handle)
            PQfinish(handle)
            throw SyncStoreError(.connection, "cannot connect to PostgreSQL: \(reason)")
        }
        self.handle = handle
        // Notices (a migration's "already exists, skipping") are not the server's log's business.
        _ = try? run("SET client_min_messages TO warning")
    }

    deinit { PQfinish(handle) }

    /// The payloads of notifications (on channels this connection listens to) that arrive within
    /// `timeout`; nil when the connection broke.
    func notifications(waiting timeout: Duration) -> [String]? {
        var payloads = drainNotifications()
        guard payloads.isEmpty else { return payloads }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(
            clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        _ = poll(&descriptor, 1, max(0, milliseconds))
        guard PQconsumeInput(handle) == 1 else { return nil }
        payloads = drainNotifications()
        return payloads
    }

    private func drainNotifications() -> [String] {
        var payloads: [String] = []
        while let notification = PQnotifies(handle) {
            payloads.append(notification.pointee.extra.map { String(cString: $0) } ?? "")
            PQfreemem(notification)
        }
        return payloads
    }

    private static func message(_ handle: OpaquePointer) -> String {
        PQerrorMessage(handle).map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"
    }

    /// A parameter: bytes (bytea), text, a 64-bit integer (int8) or a boolean, sent in binary.
    enum Parameter {
        case bytes(Data)
        case text(String)
        case integer(Int64)
        case boolean(Bool)
        case null
    }

    /// The rows of a statement's result, each column as its binary value.
    struct Rows {
        fileprivate(set) var values: [[Data?]] = []
        /// Rows a command changed (`UPDATE`, `INSERT`, `DELETE`).
        fileprivate(set) var affected = 0

        func integer(_ row: Int, _ column: Int) throws(SyncStoreError) -> Int64 {
            guard row < values.count, column < values[row].count, let bytes = values[row][column], bytes.count == 8
            else { throw SyncStoreError(.malformed, "column \(column) is not an int8") }
            return bytes.reduce(Int64(0)) { $0 << 8 | Int64($1) }
        }

        func bytes(_ row: Int, _ column: Int) throws(SyncStoreError) -> Data {
            guard row < values.count, column < values[row].count, let bytes = values[row][column] else {
                throw SyncStoreError(.malformed, "column \(column) is null")
            }
            return bytes
        }

        func boolean(_ row: Int, _ column: Int) throws(SyncStoreError) -> Bool {
            guard row < values.count, column < values[row].count, let bytes = values[row][column], bytes.count == 1
            else { throw SyncStoreError(.malformed, "column \(column) is not a boolean") }
            return bytes.first != 0
        }
    }

    /// Runs one statement with `parameters` ($1, $2, …) and returns its rows, in binary.
    @discardableResult
    func run(_ sql: String, _ parameters: [Parameter] = []) throws(SyncStoreError) -> Rows {
        // Each parameter's bytes, kept alive until the call returns.
        var buffers: [Data?] = []
        var types: [UInt32] = []
        for parameter in parameters {
            switch parameter {
            case .bytes(let data):
                buffers.append(data)
                types.append(17)  // bytea
            case .text(let text):
                buffers.append(Data(text.utf8))
                types.append(25)  // text
            case .integer(let number):
                buffers.append(withUnsafeBytes(of: number.bigEndian) { Data($0) })
                types.append(20)  // int8
            case .boolean(let flag):
                buffers.append(Data([flag ? 1 : 0]))
                types.append(16)  // bool
            case .null:
                buffers.append(nil)
                types.append(0)
            }
        }
        let lengths = buffers.map { Int32($0?.count ?? 0) }
        let formats = [Int32](repeating: 1, count: buffers.count)
        let result = withPointers(to: buffers) { pointers in
            PQexecParams(handle, sql, Int32(buffers.count), types, pointers, lengths, formats, 1)
        }
        guard let result else { throw SyncStoreError(.connection, Self.message(handle)) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            break
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let text = PQresultErrorMessage(result).map { String(cString: $0) } ?? "?"
            throw SyncStoreError(
                PQstatus(handle) == CONNECTION_OK ? .statement : .connection,
                text.trimmingCharacters(in: .whitespacesAndNewlines), state: state)
        }
        var rows = Rows()
        rows.affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
        let columns = PQnfields(result)
        for row in 0..<PQntuples(result) {
            var values: [Data?] = []
            for column in 0..<columns {
                if PQgetisnull(result, row, column) == 1 {
                    values.append(nil)
                } else {
                    let length = Int(PQgetlength(result, row, column))
                    values.append(PQgetvalue(result, row, column).map { Data(bytes: $0, count: length) } ?? Data())
                }
            }
            rows.values.append(values)
        }
        return rows
    }

    /// Runs a script of several statements (a migration: text of this program's own, never input).
    func runScript(_ sql: String) throws(SyncStoreError) {
        guard let result = PQexec(handle, sql) else { throw SyncStoreError(.connection, Self.message(handle)) }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK || PQresultStatus(result) == PGRES_TUPLES_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let text = PQresultErrorMessage(result).map { String(cString: $0) } ?? "?"
            throw SyncStoreError(.statement, text.trimmingCharacters(in: .whitespacesAndNewlines), state: state)
        }
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T>(_ body: () throws(SyncStoreError) -> T) throws(SyncStoreError) -> T {
        try run("BEGIN")
        do {
            let value = try body()
            try run("COMMIT")
            return value
        } catch {
            _ = try? run("ROLLBACK")
            throw error
        }
    }

    /// Pointers to each buffer's bytes (nil for a null), valid inside `body`.
    private func withPointers<T>(to buffers: [Data?], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
        var pointers: [UnsafePointer<CChar>?] = []
        func next(_ index: Int) -> T {
            guard index < buffers.count else { return body(pointers) }
            guard let buffer = buffers[index] else {
                pointers.append(nil)
                return next(index + 1)
            }
            // An empty buffer still needs an address.
            let bytes = buffer.isEmpty ? Data([0]) : buffer
            return bytes.withUnsafeBytes { raw in
                pointers.append(raw.baseAddress?.assumingMemoryBound(to: CChar.self))
                return next(index + 1)
            }
        }
        return next(0)
    }
}
