import FoundationEssentials
import KeychainBytes

/// When a passcode attempt was counted, on both clocks. Each clock can be moved by someone: the wall
/// clock by its administrator (or, for one process, by a preloaded library), the clock since boot by
/// any user for the processes of a time namespace they create. Neither can move the other, so a delay
/// counts as elapsed only as far as both clocks agree it has; a clock that reads earlier than the
/// attempt makes the delay start again from the next attempt, never run longer than the schedule.
public struct AttemptTime: Equatable, Sendable {
    /// Seconds since 1970 on the wall clock.
    public var wall: Double
    public var boot: BootInstant

    public init(wall: Double, boot: BootInstant) {
        self.wall = wall
        self.boot = boot
    }

    static let none = AttemptTime(wall: 0, boot: .none)

    public static func now(_ clock: any KeychainClock) -> AttemptTime {
        AttemptTime(wall: clock.now().timeIntervalSince1970, boot: clock.sinceBoot())
    }

    /// Seconds from `self` to `later` that both clocks agree on, or nil when either reads earlier than
    /// `self` (a clock was set back, or the attempt was recorded with a moved clock). Across a reboot
    /// only the wall clock spans the gap.
    func secondsElapsed(until later: AttemptTime) -> Double? {
        let wall = later.wall - self.wall
        guard wall >= 0 else { return nil }
        guard later.boot.boot == boot.boot else { return wall }
        guard later.boot.nanoseconds >= boot.nanoseconds else { return nil }
        return min(wall, Double(later.boot.nanoseconds - boot.nanoseconds) / 1e9)
    }
}
