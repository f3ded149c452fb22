import Foundation
import KeychainEngine
import KeychainKeybag
import KeychainSystem
import XCTest

/// A second review swapped a link the caller owned, in a directory others could write, between the
/// check and the use: the keychain's files went into the attacker's directory.
final class SharedDirectoryLinkTests: EngineTestCase {
    func testALinkInADirectoryOthersCanWriteIsRefused() throws {
        keychain = nil
        let shared = directory + "-shared"
        let safe = directory + "-safe"
        defer {
            try? FileManager.default.removeItem(atPath: shared)
            try? FileManager.default.removeItem(atPath: safe)
        }
        XCTAssertEqual(mkdir(shared, 0o700), 0)
        XCTAssertEqual(mkdir(safe, 0o700), 0)
        XCTAssertEqual(symlink(safe, shared + "/current"), 0)
        XCTAssertNoThrow(try open(directory: shared + "/current/keychain"), "a private directory may hold the link")
        keychain = nil
        XCTAssertEqual(chmod(shared, 0o777), 0)
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        assertError(.notAvailable("")) { _ = try open(directory: shared + "/current/keychain") }
        XCTAssertTrue(lines.all.contains { $0.contains("on the way is writable by other users") }, "\(lines.all)")
        // Files are reached through the resolved path, never through the link again.
        XCTAssertEqual(chmod(shared, 0o700), 0)
        let opened = try open(directory: shared + "/current/keychain")
        XCTAssertEqual(opened.directory, (safe as NSString).resolvingSymlinksInPath + "/keychain")
    }
}
