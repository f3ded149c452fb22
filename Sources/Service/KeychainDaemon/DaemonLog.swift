import Foundation
import Synchronization

/// The daemon's log: one line per event on standard error, each starting with its syslog priority in
/// angle brackets (`<3>` error, `<4>` warning, `<6>` info), which journald reads as the line's level.
/// Lines never hold secrets, item attributes or group names a client sent; pids, uids, executable
/// paths and reasons only.
public enum DaemonLog {
    private static let output = Mutex(())

    public static func error(_ message: String) { write(3, message) }
    public static func warning(_ message: String) { write(4, message) }
    public static func info(_ message: String) { write(6, message) }

    private static func write(_ priority: Int, _ message: String) {
        // One write per line, under a lock: lines from many connection threads never interleave.
        let line = Data("<\(priority)>securityd: \(message.replacingOccurrences(of: "\n", with: " "))\n".utf8)
        output.withLock { _ in FileHandle.standardError.write(line) }
    }
}
