import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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

    /// Runs `work` on an idle thread if one is free, else on a new one; false (and `work` is not run)
    /// when no thread could be started, for the caller to give the connection up.
    func run(_ work: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        // More idle threads than work already handed to them: one of them takes this. Handing it over
        // when every idle thread has work waiting already would queue it behind a connection.
        if idle > pending.count {
            pending.append(work)
            condition.signal()
            condition.unlock()
            return true
        }
        condition.unlock()
        return startThread(first: work)
    }

    /// A detached thread that runs `work`, then takes what is handed to idle threads.
    private func startThread(first work: @escaping @Sendable () -> Void) -> Bool {
        var attributes = pthread_attr_t()
        guard pthread_attr_init(&attributes) == 0 else { return false }
        defer { pthread_attr_destroy(&attributes) }
        guard pthread_attr_setstacksize(&attributes, stackSize) == 0,
            pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED)) == 0
        else { return false }
        let start = Unmanaged.passRetained(ThreadStart(threads: self, work: work))
        var thread = pthread_t()
        let started = pthread_create(
            &thread, &attributes,
            { argument in
                guard let argument else { return nil }
                let start = Unmanaged<ThreadStart>.fromOpaque(argument).takeRetainedValue()
                start.work()
                start.threads.serveWhileNeeded()
                return nil
            }, start.toOpaque())
        if started != 0 {
            start.release()
            return false
        }
        return true
    }

    /// What a new thread runs first, and where it goes back to.
    private final class ThreadStart {
        let threads: ConnectionThreads
        let work: @Sendable () -> Void

        init(threads: ConnectionThreads, work: @escaping @Sendable () -> Void) {
            self.threads = threads
            self.work = work
        }
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
