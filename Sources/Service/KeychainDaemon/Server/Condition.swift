import Foundation

/// A condition to wait on with a deadline.
final class Condition: @unchecked Sendable {
    // NSCondition is thread-safe; it guards no state of its own here.
    private let condition = NSCondition()

    func signal() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until `done()` is true or `deadline` passes; returns whether it became true.
    func wait(until deadline: Duration, _ done: () -> Bool) -> Bool {
        let (seconds, attoseconds) = deadline.components
        let end = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        while !done() {
            if !condition.wait(until: end) { return done() }
        }
        return true
    }
}
