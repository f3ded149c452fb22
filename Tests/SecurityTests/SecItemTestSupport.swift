import Security
import XCTest

/// Shorthands over the SecItem API for tests; each returns the OSStatus as the caller would see it.
enum Item {
    static func add(_ query: [String: Any]) -> OSStatus { SecItemAdd(query as CFDictionary, nil) }

    static func add(_ query: [String: Any], result: inout CFTypeRef?) -> OSStatus {
        SecItemAdd(query as CFDictionary, &result)
    }

    static func copy(_ query: [String: Any]) -> (OSStatus, CFTypeRef?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, result)
    }

    static func update(_ query: [String: Any], _ changes: [String: Any]) -> OSStatus {
        SecItemUpdate(query as CFDictionary, changes as CFDictionary)
    }

    static func delete(_ query: [String: Any]) -> OSStatus { SecItemDelete(query as CFDictionary) }

    static func password(service: String, account: String, secret: String = "secret") -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
            kSecAttrAccount as String: account, kSecValueData as String: Data(secret.utf8),
        ]
    }

    static func attributes(_ query: [String: Any]) -> [String: Any]? {
        var query = query
        query[kSecValueData as String] = nil
        query[kSecReturnAttributes as String] = true
        return copy(query).1 as? [String: Any]
    }

    static func secret(_ query: [String: Any]) -> String? {
        var query = query
        query[kSecValueData as String] = nil
        query[kSecReturnData as String] = true
        return (copy(query).1 as? Data).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// A test on a fresh keychain: embedded, or through a securityd of its own that knows this test process
/// from its app registry when `KEYCHAIN_TEST_THROUGH_DAEMON=1` (`ThroughDaemonTests` runs the SecItem
/// suites again that way). The answers must be exactly the same.
class KeychainTestCase: XCTestCase {
    var keychain: TemporaryKeychain!

    /// Whether this run goes through a daemon.
    static var throughDaemon: Bool { getenv("KEYCHAIN_TEST_THROUGH_DAEMON").map { String(cString: $0) } == "1" }

    override func setUp() {
        keychain = TemporaryKeychain(
            accessGroups: ["TEAM.com.example.app", "TEAM.group.shared"], throughDaemon: Self.throughDaemon)
    }
    override func tearDown() {
        if Self.throughDaemon {
            // The calls went to this test's daemon, which registered this process in its directory.
            XCTAssertNotNil(keychain.daemon)
            XCTAssertEqual(KeychainServices.daemonSocket(), keychain.daemon?.socket)
            XCTAssertTrue(FileManager.default.fileExists(atPath: keychain.directory + "/apps.registry"))
        }
        keychain = nil
    }
}
