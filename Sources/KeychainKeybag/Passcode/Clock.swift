import Foundation
import KeychainCore

#if canImport(Glibc)
    import Glibc
#endif

/// The keychain's two clocks, injectable so tests can step through the passcode delays without waiting.
public protocol Clock: Sendable {
    /// Wall-clock time: creation and modification dates of items.
    func now() -> Date

    /// Time since boot. With the wall clock, it measures the passcode delays: time has passed only when
    /// both say so (see `AttemptTime`).
    func sinceBoot() -> BootInstant
}

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

    public static func now(_ clock: any Clock) -> AttemptTime {
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

/// A reading of the time since boot, named by the boot it belongs to: readings from different boots
/// cannot be compared.
public struct BootInstant: Equatable, Sendable {
    /// The kernel's random identifier of this boot (16 bytes).
    public var boot: Data
    public var nanoseconds: UInt64

    public init(boot: Data, nanoseconds: UInt64) {
        self.boot = boot
        self.nanoseconds = nanoseconds
    }

    /// The instant of a keybag that has never recorded one.
    static let none = BootInstant(boot: Data(count: 16), nanoseconds: 0)
}

public struct SystemClock: Clock {
    public init() {}

    public func now() -> Date { Date() }

    public func sinceBoot() -> BootInstant {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        let nanoseconds = UInt64(max(time.tv_sec, 0)) &* 1_000_000_000 &+ UInt64(max(time.tv_nsec, 0))
        return BootInstant(boot: Self.bootIdentifier, nanoseconds: nanoseconds)
    }

    /// `/proc/sys/kernel/random/boot_id` as 16 bytes; all zero where the kernel does not offer it.
    private static let bootIdentifier: Data = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else {
            return Data(count: 16)
        }
        let digits = Array(text.unicodeScalars.filter { $0.properties.isASCIIHexDigit })
        guard digits.count == 32 else { return Data(count: 16) }
        return Data(
            stride(from: 0, to: 32, by: 2).compactMap {
                UInt8(String(String.UnicodeScalarView(digits[$0..<$0 + 2])), radix: 16)
            })
    }()
}
