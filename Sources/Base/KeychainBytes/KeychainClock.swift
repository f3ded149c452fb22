import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// The keychain's two clocks, injectable so tests can step through the passcode delays without waiting.
/// (Named apart from the standard library's `Clock`, which measures durations, not dates.)
public protocol KeychainClock: Sendable {
    /// Wall-clock time: creation and modification dates of items.
    func now() -> Date

    /// Time since boot. With the wall clock, it measures the passcode delays: time has passed only when
    /// both say so (see `AttemptTime`).
    func sinceBoot() -> BootInstant
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
    public static let none = BootInstant(boot: Data(count: 16), nanoseconds: 0)
}

public struct SystemClock: KeychainClock {
    public init() {}

    public func now() -> Date { Date() }

    public func sinceBoot() -> BootInstant {
        BootInstant(boot: Self.bootIdentifier, nanoseconds: Self.nanosecondsSinceBoot)
    }

    /// CLOCK_BOOTTIME, which also counts the time the machine was suspended (and in which the kernel
    /// gives processes' start times).
    public static var nanosecondsSinceBoot: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return UInt64(max(time.tv_sec, 0)) &* 1_000_000_000 &+ UInt64(max(time.tv_nsec, 0))
    }

    /// `/proc/sys/kernel/random/boot_id` as 16 bytes; all zero where the kernel does not offer it.
    private static let bootIdentifier: Data = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else {
            return Data(count: 16)
        }
        let digits = text.filter { $0 != "-" && !$0.isWhitespace }
        guard let bytes = Hex.decode(digits), bytes.count == 16 else { return Data(count: 16) }
        return bytes
    }()
}
