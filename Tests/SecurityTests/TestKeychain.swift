import Foundation
import KeychainTestSupport
import XCTest

/// Points the keychain at a fresh temporary directory for one test, with the given entitlements, and
/// removes it afterwards. Embedded: the entitlements are `KEYCHAIN_ACCESS_GROUPS` and no daemon is used
/// (`KEYCHAIN_SOCKET` set empty). Through a daemon: a `securityd` of its own serves that directory,
/// and this test process is registered with the groups (the variable is then set to something else,
/// which the daemon must ignore).
final class TemporaryKeychain {
    let directory: String
    let daemon: TestDaemon?

    init(accessGroups: [String] = ["com.example.app"], throughDaemon: Bool = false) {
        directory = NSTemporaryDirectory() + "keychain-test-" + UUID().uuidString
        setenv("KEYCHAIN_HOME", directory, 1)
        setenv("KEYCHAIN_LOG", "off", 1)
        setenv("KEYCHAIN_COMPANION", "simulated", 1)
        if throughDaemon {
            do {
                let daemon = try TestDaemon(arguments: ["--companion", "simulated"], home: directory)
                self.daemon = daemon
                setenv("KEYCHAIN_SOCKET", daemon.socket, 1)
            } catch {
                XCTFail("cannot start securityd: \(error)")
                daemon = nil
                setenv("KEYCHAIN_SOCKET", "/nonexistent/securityd.sock", 1)
            }
        } else {
            daemon = nil
            setenv("KEYCHAIN_SOCKET", "", 1)
        }
        setAccessGroups(accessGroups)
    }

    func setAccessGroups(_ groups: [String]) {
        guard let daemon else {
            setenv("KEYCHAIN_ACCESS_GROUPS", groups.joined(separator: ","), 1)
            return
        }
        // A claim the daemon must not believe.
        setenv("KEYCHAIN_ACCESS_GROUPS", "TEAM.claimed.by.the.client", 1)
        do {
            if groups.isEmpty {
                try? daemon.service().removeApp(executablePath: TestDaemon.ownExecutable, passcode: nil)
            } else {
                try daemon.register(groups: groups)
            }
        } catch {
            XCTFail("cannot register the test process: \(error)")
        }
    }

    deinit {
        setenv("KEYCHAIN_SOCKET", "", 1)
        try? FileManager.default.removeItem(atPath: directory)
    }
}
