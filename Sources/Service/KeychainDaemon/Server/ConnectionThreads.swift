import Foundation

/// Runs each connection on a thread of its own, as starting a thread for it would, but keeps a thread
/// whose connection ended waiting a while for the next one: every shell call of the `security` command
/// is a new connection, and creating and ending a thread for each cost the daemon a tenth of its work
/// for such a call. A connection never waits for another: one that finds no idle thread gets a new one.
final class ConnectionThreads: @unchecked Sendable {
    // `pending` and `idle` are guarded by `condition`'s lock.
    private let condition = NSCondition()
    private var pending: [@Sendable () -> Void] = []
    /// Threads waiting for work (not running any).
    private var idle = 0
    private let stackSize: Int
    private let idleLifetime: TimeInterval

    /// `idleLifetime`: how long a thread with nothing to do waits for the next connection before it ends.
    init(stackSize: Int, idleLifetime: Duration = .seconds(5)) {
        self.stackSize = stackSize
        let (seconds, attoseconds) = idleLifetime.components
        self.idleLifetime = Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Runs `work` on an idle thread if one is free, else on a new one.
    func run(_ work: @escaping @Sendable () -> Void) {
        condition.lock()
        // More idle threads than work already handed to them: one of them takes this.
        if idle > pending.count {
            pending.append(work)
            condition.signal()
            condition.unlock()
            return
        }
        condition.unlock()
        let thread = Thread { [self] in
            work()
            serveWhileNeeded()
        }
        thread.stackSize = stackSize
        thread.start()
    }

    /// Takes the work handed to idle threads until none comes for `idleLifetime`; then the thread ends.
    private func serveWhileNeeded() {
        condition.lock()
        idle += 1
        var deadline = Date(timeIntervalSinceNow: idleLifetime)
        while true {
            if !pending.isEmpty {
                let work = pending.removeFirst()
                idle -= 1
                condition.unlock()
                work()
                condition.lock()
                idle += 1
                deadline = Date(timeIntervalSinceNow: idleLifetime)
                continue
            }
            // Work handed over while the wait timed out is seen above, under the same lock, first.
            if !condition.wait(until: deadline), pending.isEmpty {
                idle -= 1
                condition.unlock()
                return
            }
        }
    }

    /// Threads waiting for work now (for tests).
    var idleThreads: Int {
        condition.lock()
        defer { condition.unlock() }
        return idle
    }
}
