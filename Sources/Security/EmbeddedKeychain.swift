import Foundation
import KeychainEngine
import Synchronization

/// The keychain this process uses when no daemon serves it: the directory `KEYCHAIN_HOME` names,
/// else `$XDG_DATA_HOME/keychain`, else `~/.local/share/keychain`.
///
/// The environment is read on every call (a `getenv`, not a copy of the environment), so a test
/// that points `KEYCHAIN_HOME` or `KEYCHAIN_ACCESS_GROUPS` elsewhere takes effect at once; each
/// directory is opened once per process.
public enum EmbeddedKeychain {
    private static let opened = Mutex<[String: Keychain]>([:])

    /// The keychain directory for the current environment.
    public static var directory: String {
        if let home = variable("KEYCHAIN_HOME"), !home.isEmpty { return home }
        if let data = variable("XDG_DATA_HOME"), !data.isEmpty {
            return (data as NSString).appendingPathComponent("keychain")
        }
        let home = variable("HOME") ?? NSHomeDirectory()
        return (home as NSString).appendingPathComponent(".local/share/keychain")
    }

    /// The open keychain for the current environment, opening it on first use.
    public static func current() throws -> Keychain {
        let path = directory
        if let keychain = opened.withLock({ $0[path] }) { return keychain }
        let keychain = try Keychain(
            directory: path, options: KeychainOptions(deviceRootPath: variable("KEYCHAIN_DEVICE_ROOT")))
        return opened.withLock { cache in
            if let existing = cache[path] { return existing }
            cache[path] = keychain
            return keychain
        }
    }

    private static let lastClient = Mutex<(raw: String?, identity: ClientIdentity)?>(nil)

    /// The emulated entitlements of this process (see `ClientIdentity.fromEnvironment`), parsed again
    /// only when `KEYCHAIN_ACCESS_GROUPS` changes.
    public static func client() -> ClientIdentity {
        let raw = variable("KEYCHAIN_ACCESS_GROUPS")
        if let cached = lastClient.withLock({ $0 }), cached.raw == raw { return cached.identity }
        let identity = ClientIdentity.fromEnvironment()
        lastClient.withLock { $0 = (raw, identity) }
        return identity
    }

    private static func variable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
