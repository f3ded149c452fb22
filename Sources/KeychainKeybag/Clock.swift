import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The keychain's two clocks, injectable so tests can step through the passcode delays without waiting.
public protocol Clock: Sendable {
    /// Wall-clock time: creation and modification dates of items.
    func now() -> Date

    /// Time since boot, which no user can set: the passcode delays are measured on it, so changing the
    /// wall clock (or a process's idea of it) neither skips a delay nor stretches it.
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
