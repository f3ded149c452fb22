import Foundation
import Synchronization

/// Hands out connections to one database file, one thread per connection at a time.
///
/// WAL lets readers run beside one writer, so a thread never waits for another thread's read; writers
/// serialize in SQLite itself (BEGIN IMMEDIATE with a busy timeout), which also orders them against
/// other processes sharing the file.
public final class ConnectionPool: Sendable {
    public let path: String
    private let idle = Mutex<[UncheckedConnection]>([])
    private let maximumIdle: Int
    private let durability: Durability
    private let groupCommit: GroupCommit?
    private let writers = WriterQueue()

    /// Opens the first connection now, so a missing or unreadable database fails here.
    public init(path: String, create: Bool, maximumIdle: Int = 4, durability: Durability = .eachCommit) throws {
        self.path = path
        // A daemon serves many clients at once: a connection opened and closed per request would cost
        // more than the request.
        self.maximumIdle = durability == .grouped ? max(maximumIdle, 64) : maximumIdle
        self.durability = durability
        let first = try Connection(path: path, create: create, durability: durability)
        groupCommit = durability == .grouped ? try GroupCommit(path: path) : nil
        first.afterCommit = groupCommit.map { group in { try group.commitFinished() } }
        first.writers = writers
        idle.withLock { $0.append(UncheckedConnection(connection: first)) }
    }

    private func open() throws -> Connection {
        let connection = try Connection(path: path, create: false, durability: durability)
        connection.afterCommit = groupCommit.map { group in { try group.commitFinished() } }
        connection.writers = writers
        return connection
    }

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
    }
}

/// A connection parked in the pool. It is touched by one thread at a time: the pool's lock
/// orders the hand-over.
private struct UncheckedConnection: @unchecked Sendable {
    let connection: Connection
}
