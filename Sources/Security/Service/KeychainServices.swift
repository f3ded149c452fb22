import KeychainCore
import KeychainEngine
import Synchronization

/// Which keychain service this process's SecItem calls (and the `security` command) use.
///
/// By default the embedded engine on the keychain the environment names (`EmbeddedKeychain`), for the
/// caller the environment describes. `use(_:)` puts another service in its place: the daemon's client
/// will, when a daemon runs; tests put a fake there.
public enum KeychainServices {
    private static let chosen = Mutex<(any KeychainService)?>(nil)

    /// The service for this call: the one set with `use(_:)`, else the embedded keychain.
    public static func current() throws -> any KeychainService {
        if let service = chosen.withLock({ $0 }) { return service }
        return InProcessKeychainService(keychain: try EmbeddedKeychain.current(), client: EmbeddedKeychain.client())
    }

    /// Routes this process's keychain calls to `service`; nil returns them to the embedded keychain.
    public static func use(_ service: (any KeychainService)?) {
        chosen.withLock { $0 = service }
    }
}
