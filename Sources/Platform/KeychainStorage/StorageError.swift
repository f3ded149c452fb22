import CSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A failure of the SQLite layer, classified the way the engine needs to react to it.
public struct StorageError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Equatable, Sendable {
        /// A UNIQUE constraint failed: the row already exists.
        case constraint
        /// Another process holds the lock longer than the busy timeout.
        case busy
        /// The file is not a database, or its pages are damaged.
        case corrupt
        /// The file or directory cannot be written.
        case readOnly
        /// The disk is full.
        case full
        /// A read or write of the file failed.
        case io
        /// The file cannot be opened.
        case cannotOpen
        /// SQLite ran out of memory.
        case noMemory
        /// Anything else: a bug in our SQL or an unexpected state.
        case other
    }

    public let kind: Kind
    /// SQLite's extended result code.
    public let code: Int32
    /// SQLite's message; it never contains bound values, so it never contains secrets.
    public let message: String

    public init(kind: Kind, code: Int32, message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    init(code: Int32, connection: OpaquePointer?) {
        let sqlite = try? sqliteLibrary.get()
        let message =
            connection.flatMap { sqlite?.sqlite3_errmsg?($0) }.map { String(cString: $0) }
            ?? sqlite?.sqlite3_errstr?(code).map { String(cString: $0) } ?? "SQLite error \(code)"
        // A write refused for want of room reaches SQLite as an I/O error unless the OS said ENOSPC:
        // a file-size limit (EFBIG) or a quota (EDQUOT) is a full disk to the caller all the same.
        let systemError = connection.flatMap { sqlite?.sqlite3_system_errno?($0) } ?? 0
        self.init(kind: StorageError.classify(code, systemError: systemError), code: code, message: message)
    }

    static func classify(_ code: Int32, systemError: Int32 = 0) -> Kind {
        // Creating the log or its index on a disk without room (or inodes) fails to open, for the same cause.
        if code & 0xff == SQLITE_IOERR || code & 0xff == SQLITE_CANTOPEN, [ENOSPC, EFBIG, EDQUOT].contains(systemError)
        {
            return .full
        }
        return switch code & 0xff {
        case SQLITE_CONSTRAINT: .constraint
        case SQLITE_BUSY, SQLITE_LOCKED: .busy
        case SQLITE_CORRUPT, SQLITE_NOTADB: .corrupt
        case SQLITE_READONLY, SQLITE_PERM: .readOnly
        case SQLITE_FULL: .full
        case SQLITE_IOERR: .io
        case SQLITE_CANTOPEN: .cannotOpen
        case SQLITE_NOMEM: .noMemory
        default: .other
        }
    }

    public var description: String { "SQLite error \(code): \(message)" }
}
