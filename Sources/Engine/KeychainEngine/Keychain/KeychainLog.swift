import FoundationEssentials
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Where the keychain reports problems an operator must see: a damaged database, a keybag from
/// another device, a tampered item. Messages never contain secrets or attribute values.
///
/// By default they go to standard error; `KEYCHAIN_LOG=off` silences them, and tests install a sink.
public enum KeychainLog {
    private static let sink = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Replaces the destination (nil restores standard error).
    public static func setSink(_ newSink: (@Sendable (String) -> Void)?) {
        sink.withLock { $0 = newSink }
    }

    public static func error(_ message: String) {
        let line = "swift-keychain: \(message)"
        if let custom = sink.withLock({ $0 }) {
            custom(line)
            return
        }
        if let setting = getenv("KEYCHAIN_LOG"), strcmp(setting, "off") == 0 { return }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}
