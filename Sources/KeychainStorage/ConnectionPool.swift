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

    /// Opens the first connection now, so a missing or unreadable database fails here.
    public init(path: String, create: Bool, maximumIdle: Int = 4) throws {
        self.path = path
        self.maximumIdle = maximumIdle
        let first = try Connection(path: path, create: create)
        idle.withLock { $0.append(UncheckedConnection(connection: first)) }
    }

    public func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        let borrowed =
            try idle.withLock { connections in connections.popLast() }?.connection
            ?? Connection(path: path, create: false)
        defer {
            let returned = UncheckedConnection(connection: borrowed)
            idle.withLock { connections in
                if connections.count < maximumIdle { connections.append(returned) }
            }
        }
        return try body(borrowed)
    }
}

/// A connection parked in the pool. It is touched by one thread at a time: the pool's lock
/// orders the hand-over.
private struct UncheckedConnection: @unchecked Sendable {
    let connection: Connection
}
