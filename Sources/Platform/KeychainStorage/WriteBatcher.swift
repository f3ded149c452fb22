import FoundationEssentials
import KeychainSystem

/// Group commit: the write transactions of one process, run on one writer connection, many to a SQLite
/// transaction. A writer queues its work; whichever writer finds no batch running takes everything
/// queued, runs each piece in a savepoint of its own (a piece that throws is rolled back alone), and
/// commits once: one sync of the log, and each page the pieces share written once, for the whole
/// batch. Every writer returns only after the commit that holds its work, or with the error that
/// undid it.
///
/// A single writer pays nothing for this: it finds the queue empty and commits its work alone.
final class WriteBatcher: @unchecked Sendable {
    // Everything below is touched only while `condition` is locked, except the writer connection,
    // which only the thread running a batch (`running` true) uses.
    private let condition = ConditionLock()
    private var queue: [Job] = []
    private var running = false
    private var connection: Connection?
    private let open: () throws -> Connection
    private var commits = 0
    private var writes = 0

    /// Writes committed, and the transactions that committed them, so far (their ratio is the grouping
    /// achieved); writes that failed or were rolled back count in neither.
    var statistics: (writes: Int, commits: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (writes, commits)
    }

    /// The largest batch: a bound on the work one commit can lose to one failing commit.
    private static let maximumBatch = 256

    init(open: @escaping () throws -> Connection) { self.open = open }

    /// Runs `body` in a write transaction shared with whatever else is queued.
    func write<T>(_ body: (Connection) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let job = Job()
            var result: T?
            // The closure runs on the batch's thread while this thread waits for it: `result` is read
            // only after the job is marked done, under the condition's lock.
            job.work = { connection in result = try body(connection) }
            condition.lock()
            queue.append(job)
            while !job.done {
                if running {
                    condition.wait()
                    continue
                }
                let batch = Array(queue.prefix(Self.maximumBatch))
                queue.removeFirst(batch.count)
                running = true
                condition.unlock()
                let committed = run(batch)
                condition.lock()
                running = false
                if committed > 0 {
                    commits += 1
                    writes += committed
                }
                for finished in batch { finished.done = true }
                condition.broadcast()
            }
            condition.unlock()
            job.work = nil
            if let error = job.error { throw error }
            guard let result else {
                throw StorageError(kind: .other, code: 0, message: "a write finished without a result")
            }
            return result
        }
    }

    /// Closes the writer connection when no batch is running (the next write opens another).
    func closeConnection() {
        condition.lock()
        if !running { connection = nil }
        condition.unlock()
    }

    /// Runs a batch in one transaction; returns how many of its writes were committed.
    private func run(_ batch: [Job]) -> Int {
        do {
            let writer = try connection ?? open()
            connection = writer
            try writer.execute("BEGIN IMMEDIATE")
            var succeeded = 0
            for job in batch {
                try writer.execute("SAVEPOINT piece")
                do {
                    try job.work?(writer)
                    try writer.execute("RELEASE piece")
                    succeeded += 1
                } catch {
                    job.error = error
                    guard writer.isInTransaction else {
                        // SQLite rolled the whole transaction back (a full disk, an I/O error): every
                        // piece before this one went with it, and fails with the same cause.
                        for job in batch where job.error == nil { job.error = error }
                        return 0
                    }
                    try writer.execute("ROLLBACK TO piece")
                    try writer.execute("RELEASE piece")
                }
            }
            guard succeeded > 0 else {
                try writer.execute("ROLLBACK")
                return 0
            }
            do {
                try writer.execute("COMMIT")
                return succeeded
            } catch {
                try? writer.execute("ROLLBACK")
                for job in batch where job.error == nil { job.error = error }
                return 0
            }
        } catch {
            // BEGIN, a savepoint or a rollback failed: nothing of the batch is committed.
            if let writer = connection { try? writer.execute("ROLLBACK") }
            for job in batch where job.error == nil { job.error = error }
            return 0
        }
    }
}

/// One queued write: its work, and how it ended.
private final class Job: @unchecked Sendable {
    // Set by the submitting thread before queueing, run and resolved by the batch's thread, read back
    // by the submitter after `done` (all hand-overs under the batcher's condition lock).
    var work: ((Connection) throws -> Void)?
    var error: (any Error)?
    var done = false
}
