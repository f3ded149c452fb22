import Foundation
import KeychainBytes

/// One database connection for every long poll of a server: a thread holds it, LISTENs on it, and
/// after each notification (and once a second, since a notification can be missed and CockroachDB
/// sends none) reads the log's end of every account someone waits on, in one query. A waiting device
/// holds no connection, only a wait on a condition.
final class SyncWakeups: @unchecked Sendable {
    private let conninfo: String
    private let condition = NSCondition()
    /// Guarded by `condition`: how many wait on each account (hex id), the log's end of each as last
    /// read, and whether the thread runs.
    private var waiting: [String: Int] = [:]
    private var latest: [String: Int64] = [:]
    private var started = false

    init(conninfo: String) { self.conninfo = conninfo }

    /// Waits until the account's log passes `seq`, as the listening thread reads it, or `timeout`
    /// passes; returns the end it read last (nil: none read yet).
    func wait(for account: String, after seq: Int64, timeout: Duration) -> Int64? {
        let deadline = Date().addingTimeInterval(
            Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        startIfNeeded()
        waiting[account, default: 0] += 1
        defer {
            waiting[account, default: 1] -= 1
            if waiting[account] == 0 {
                waiting[account] = nil
                latest[account] = nil
            }
        }
        while (latest[account] ?? seq) <= seq, condition.wait(until: deadline) {}
        return latest[account]
    }

    /// Called with the lock held.
    private func startIfNeeded() {
        guard !started else { return }
        started = true
        let thread = Thread { [self] in listen() }
        thread.name = "keychain-syncd LISTEN"
        thread.start()
    }

    /// The listening thread: forever, with a new connection a second after one breaks. (The work of
    /// one connection is a function of its own: written inline in this endless loop, it sends the
    /// release build's optimizer into minutes of work.)
    private func listen() {
        while true {
            do { try listenOnce() } catch {
                SyncLog.warning("the listening connection failed: \(error.reason)")
            }
            Thread.sleep(forTimeInterval: 1)
        }
    }

    /// One listening connection, until it breaks.
    private func listenOnce() throws(SyncStoreError) {
        let connection = try PostgresConnection(conninfo)
        try connection.run("LISTEN \(SyncStore.notifyChannel)")
        while connection.notifications(waiting: .seconds(1)) != nil {
            condition.lock()
            let accounts = Array(waiting.keys)
            condition.unlock()
            guard !accounts.isEmpty else { continue }
            let rows = try connection.run(
                """
                SELECT encode(account_id, 'hex'), last_seq FROM accounts
                WHERE account_id = ANY (SELECT decode(unnest(string_to_array($1, ',')), 'hex'))
                """, [.text(accounts.joined(separator: ","))])
            var ends: [String: Int64] = [:]
            for row in rows.values.indices {
                ends[String(decoding: try rows.bytes(row, 0), as: UTF8.self)] = try rows.integer(row, 1)
            }
            condition.lock()
            for (account, end) in ends where waiting[account] != nil { latest[account] = end }
            condition.broadcast()
            condition.unlock()
        }
    }
}
