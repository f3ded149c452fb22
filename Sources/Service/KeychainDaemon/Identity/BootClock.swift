#if canImport(Glibc)
    import Glibc
#endif

/// CLOCK_BOOTTIME, which `/proc/<pid>/stat` start times count in.
enum BootClock {
    static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// Nanoseconds since boot as clock ticks, rounded up (a process started in the same tick passes).
    /// Seconds and the rest are converted apart, so that no product overflows however long the uptime.
    static func ticks(_ nanoseconds: UInt64) -> UInt64 {
        let perSecond = UInt64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        let (seconds, rest) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        return seconds * perSecond + (rest * perSecond + 999_999_999) / 1_000_000_000
    }
}
