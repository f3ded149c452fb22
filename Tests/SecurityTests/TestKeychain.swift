import Foundation
import XCTest

/// Points the embedded keychain at a fresh temporary directory for one test, with the given
/// emulated entitlements, and removes it afterwards.
final class TemporaryKeychain {
    let directory: String

    init(accessGroups: [String] = ["com.example.app"]) {
        directory = NSTemporaryDirectory() + "keychain-test-" + UUID().uuidString
        setenv("KEYCHAIN_HOME", directory, 1)
        setenv("KEYCHAIN_ACCESS_GROUPS", accessGroups.joined(separator: ","), 1)
        setenv("KEYCHAIN_LOG", "off", 1)
    }

    func setAccessGroups(_ groups: [String]) {
        setenv("KEYCHAIN_ACCESS_GROUPS", groups.joined(separator: ","), 1)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }
}
