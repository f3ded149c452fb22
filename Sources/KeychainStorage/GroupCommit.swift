import CSQLite
import Foundation
import Synchronization

/// When a committed write reaches the disk.
public enum Durability: Sendable {
    /// SQLite syncs the log at every commit (`synchronous = FULL`): one fsync per write. For processes
    /// that write alone, as the embedded keychain does.
    case eachCommit
    /// Commits write the log without syncing it (`synchronous = NORMAL`), and `GroupCommit` then syncs
    /// it once for every commit that finished before the sync began: many concurrent writers share one
    /// fsync, and none returns before its commit is on disk. For the daemon.
    case grouped
}

/// Group commit over SQLite's write-ahead log: a writer that has committed waits until a sync of the
/// log that began after its commit has finished. One writer at a time syncs; those that commit while
/// it does wait for the next sync, which covers them all.
///
/// The sync goes through SQLite's own handle on the log (`SQLITE_FCNTL_JOURNAL_POINTER` of a
/// connection kept for this), never through a descriptor this module opens: closing a descriptor of
/// one of SQLite's files would drop SQLite's POSIX locks.
final class GroupCommit: @unchecked Sendable {
    // Guarded by `condition`: every read and write below happens between lock() and unlock().
    private let condition = NSCondition()
    private var committed: UInt64 = 0
    private var durable: UInt64 = 0
    private var syncing = false
    private let anchor: Connection

    /// Opens the connection whose handle on the log is synced; it reads once so that SQLite opens the log.
    init(path: String) throws {
        anchor = try Connection(path: path, create: false, durability: .grouped)
        _ = try anchor.integerValue("SELECT count(*) FROM sqlite_master")
    }

    /// Called after a commit returned: returns once that commit is on disk, or throws when the sync failed.
    func commitFinished() throws {
        condition.lock()
        defer { condition.unlock() }
        committed += 1
        let ticket = committed
        while durable < ticket {
            if syncing {
                condition.wait()
                continue
            }
            syncing = true
            let target = committed
            condition.unlock()
            let synced = anchor.syncLog()
            condition.lock()
            syncing = false
            condition.broadcast()
            guard synced else {
                throw StorageError(kind: .io, code: SQLITE_IOERR | (4 << 8), message: "the log could not be synced")
            }
            durable = max(durable, target)
        }
    }
}

extension Connection {
    /// Syncs the write-ahead log through SQLite's handle on it. False when SQLite has no log open or the
    /// sync failed.
    func syncLog() -> Bool {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard fileControl(SQLITE_FCNTL_JOURNAL_POINTER, &file) == SQLITE_OK, let file,
            let methods = file.pointee.pMethods, let sync = methods.pointee.xSync
        else { return false }
        return sync(file, SQLITE_SYNC_NORMAL) == SQLITE_OK
    }
}

/// The writers of one process, one at a time. SQLite serializes writers too, but a writer that finds
/// the database locked sleeps in the busy handler (a millisecond, then longer), which caps a busy
/// daemon at a few hundred writes a second whatever the disk can do.
public final class WriterQueue: Sendable {
    private let lock = Mutex(())

    /// For a connection outside a pool: nothing else in the process queues with it.
    static let unshared = WriterQueue(shared: false)
    private let shared: Bool

    init(shared: Bool = true) { self.shared = shared }

    func serialize<T>(_ body: () throws -> T) throws -> T {
        guard shared else { return try body() }
        return try lock.withLock { _ in try body() }
    }
}
