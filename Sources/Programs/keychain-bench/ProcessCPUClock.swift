import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The CPU time another process has used, all its threads together (those that ended too), in
/// nanoseconds: the kernel's CPU clock for that process (`clock_getcpuclockid`). The benchmark reads the
/// daemon's before and after each command it spawns, so that what the daemon spends on a new process is
/// measured in the same run as the command's own time.
struct ProcessCPUClock {
    private let clock: clockid_t

    /// Nil when the kernel gives no clock for `pid` (the process ended, or another's is not readable).
    init?(pid: Int32) {
        var clock = clockid_t()
        guard clock_getcpuclockid(pid, &clock) == 0 else { return nil }
        self.clock = clock
    }

    /// The CPU time used so far; nil when the process ended.
    var nanoseconds: UInt64? {
        var now = timespec()
        guard clock_gettime(clock, &now) == 0 else { return nil }
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// Runs `body` and adds the CPU time the process used meanwhile to `total` (nanoseconds).
    func adding<T>(to total: inout UInt64, _ body: () throws -> T) rethrows -> T {
        let before = nanoseconds
        let result = try body()
        if let before, let after = nanoseconds, after >= before { total += after - before }
        return result
    }
}
