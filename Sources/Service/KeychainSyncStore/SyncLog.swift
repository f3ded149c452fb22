import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The server's log, on standard error (journald takes it under systemd). It names accounts and
/// devices by the first bytes of their ids, and never holds a record, a key or a secret.
public enum SyncLog {
    public static func info(_ message: String) { write("info", message) }
    public static func warning(_ message: String) { write("warning", message) }
    public static func error(_ message: String) { write("error", message) }

    private static func write(_ level: String, _ message: String) {
        let line = "keychain-syncd[\(getpid())] \(level): \(message)\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
