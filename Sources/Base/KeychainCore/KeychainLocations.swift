import FoundationEssentials
import KeychainBytes

#if canImport(Glibc)
    import Glibc
#endif

/// Where keychains and the daemon's socket are by default, for the embedded keychain, the daemon and
/// its clients alike. Read from the environment on each call.
public enum KeychainLocations {
    /// The system daemon's socket and directory.
    public static let systemSocket = "/run/keychain/securityd.sock"
    /// The system daemon's directory (`securityd --system` without `--home`): one keychain per user
    /// under it, readable by the daemon's user alone.
    public static let systemHome = "/var/lib/keychain"

    /// A user's keychain directory: `KEYCHAIN_HOME`, else `$XDG_DATA_HOME/keychain`, else
    /// `~/.local/share/keychain`.
    public static var userDirectory: String {
        if let home = variable("KEYCHAIN_HOME"), !home.isEmpty { return home }
        if let data = variable("XDG_DATA_HOME"), !data.isEmpty {
            return PathText.join(data, "keychain")
        }
        let home = variable("HOME") ?? homeDirectory(of: getuid()) ?? "/"
        return PathText.join(home, ".local/share/keychain")
    }

    /// A user's daemon socket: `$XDG_RUNTIME_DIR/keychain/securityd.sock`; nil without that variable.
    public static var userSocket: String? {
        guard let runtime = variable("XDG_RUNTIME_DIR"), !runtime.isEmpty else { return nil }
        return PathText.join(runtime, "keychain/securityd.sock")
    }

    private static func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
}

extension KeychainLocations {
    /// The user name of `uid` (getpwuid_r: the daemon looks users up from several threads at once).
    public static func userName(of uid: uid_t) -> String? { passwordEntry(of: uid) { $0.pw_name } }

    /// The home directory the user database gives `uid`, for a process started without `HOME`.
    public static func homeDirectory(of uid: uid_t) -> String? { passwordEntry(of: uid) { $0.pw_dir } }

    private static func passwordEntry(of uid: uid_t, _ field: (passwd) -> UnsafeMutablePointer<CChar>?) -> String? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let text = field(entry)
        else { return nil }
        return String(cString: text)
    }
}
