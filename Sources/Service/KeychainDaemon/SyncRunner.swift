import Foundation
import KeychainSyncAgent
import KeychainSyncProtocol
import Synchronization

/// securityd's sync of one keychain, in the background: a sync soon after a local change, one as
/// soon as the server says the account changed (long polling), and one every `interval` anyway.
/// Idle while the keychain is not enrolled (an enrollment wakes it).
final class SyncRunner: Sendable {
    let agent: SyncAgent
    private let interval: Duration
    private let state = Mutex(State())
    private let condition = NSCondition()

    private struct State {
        var wanted = false
        var started = false
        var lastProblem: SyncError.Code?
    }

    init(agent: SyncAgent, interval: Duration = .seconds(300)) {
        self.agent = agent
        self.interval = interval
    }

    /// Asks for a sync soon (a local change, an enrollment); starts the runner's threads the first time.
    func wake() {
        let start = state.withLock { state -> Bool in
            state.wanted = true
            defer { state.started = true }
            return !state.started
        }
        if start { startThreads() }
        condition.lock()
        condition.signal()
        condition.unlock()
    }

    /// An item changed: a sync soon, when this keychain syncs at all (the runner runs once enrolled).
    func localChange() {
        if state.withLock({ $0.started }) { wake() }
    }

    private func startThreads() {
        let syncing = Thread { [self] in syncLoop() }
        syncing.name = "sync"
        syncing.start()
        let waiting = Thread { [self] in waitLoop() }
        waiting.name = "sync wait"
        waiting.start()
    }

    private func syncLoop() {
        var failures = 0
        while true {
            condition.lock()
            if !state.withLock({ $0.wanted }) {
                _ = condition.wait(until: Date().addingTimeInterval(Double(interval.components.seconds)))
            }
            condition.unlock()
            state.withLock { $0.wanted = false }
            // A burst of writes is one sync.
            Thread.sleep(forTimeInterval: 0.2)
            do {
                _ = try agent.syncNow()
                state.withLock { $0.lastProblem = nil }
                failures = 0
            } catch {
                report(error)
                // A sync that keeps failing (the server away, or refusing) is tried less and less
                // often, up to once a minute: a wake-up each time the log moves must not spin.
                failures = min(failures + 1, 6)
                Thread.sleep(forTimeInterval: Double(1 << failures))
            }
        }
    }

    /// Long polling: each answer that says the account moved on asks for a sync.
    private func waitLoop() {
        while true {
            do {
                if try agent.waitForChange(timeout: .seconds(25)) { wake() }
            } catch {
                // Not enrolled, not yet approved, the server away: try again later.
                Thread.sleep(forTimeInterval: error.code == .notEnrolled ? 5 : 2)
            }
        }
    }

    /// Logs a failure once until the next success (an unreachable server is not logged every turn).
    private func report(_ error: SyncError) {
        let repeated = state.withLock { state -> Bool in
            defer { state.lastProblem = error.code }
            return state.lastProblem == error.code
        }
        if !repeated, error.code != .notEnrolled { DaemonLog.warning("sync: \(error.reason)") }
    }
}
