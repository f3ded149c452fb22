import FoundationEssentials
import Synchronization

/// Hands out connections to one database file, one thread per connection at a time, and runs this
/// process's writes on one writer connection, batched (`WriteBatcher`).
///
/// WAL lets readers run beside the writer, so a thread never waits for another thread's read; the
/// writers of other processes are ordered by SQLite itself (BEGIN IMMEDIATE with a busy timeout).
public final class ConnectionPool: Sendable {
    public let path: String
    private let idle = Mutex<[UncheckedConnection]>([])
    private let maximumIdle: Int
    private let batcher: WriteBatcher

    /// Opens the first connection now, so a missing or unreadable database fails here. `maximumIdle`
    /// read connections are kept open between uses (a daemon serving many clients keeps more).
    public init(path: String, create: Bool, maximumIdle: Int = 4) throws {
        self.path = path
        self.maximumIdle = maximumIdle
        let first = try Connection(path: path, create: create)
        batcher = WriteBatcher { try Connection(path: path, create: false) }
        idle.withLock { $0.append(UncheckedConnection(connection: first)) }
    }

    private func open() throws -> Connection { try Connection(path: path, create: false) }

    public func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        let borrowed = try idle.withLock { connections in connections.popLast() }?.connection ?? open()
        defer {
            let returned = UncheckedConnection(connection: borrowed)
            idle.withLock { connections in
                if connections.count < maximumIdle { connections.append(returned) }
            }
        }
        return try body(borrowed)
    }

    /// Runs `body` as one atomic piece of a write transaction on the writer connection: all of its
    /// changes or, when it throws, none. Returns once the transaction holding it is committed (and, with
    /// the log synced at every commit, on disk).
    public func writeTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        try batcher.write(body)
    }

    /// Writes run and transactions committed for them since the pool opened.
    public var writeStatistics: (writes: Int, commits: Int) { batcher.statistics }

    /// Closes the idle connections. When they were the last connections to the file in any process,
    /// SQLite folds the write-ahead log into the database and removes it, so the next process to open
    /// the file does not have to replay the log to rebuild its index. Connections in use stay open until
    /// returned, and a later `withConnection` opens a new one.
    public func closeIdleConnections() {
        var closing = idle.withLock { connections in
            defer { connections = [] }
            return connections
        }
        // Released outside the lock: each connection closes as its last reference goes.
        closing.removeAll()
        batcher.closeConnection()
    }
}

/// A connection parked in the pool. It is touched by one thread at a time: the pool's lock
/// orders the hand-over.
private struct UncheckedConnection: @unchecked Sendable {
    let connection: Connection
}
