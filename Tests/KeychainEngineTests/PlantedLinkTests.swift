import Foundation
import KeychainEngine
import KeychainKeybag
import KeychainSystem
import XCTest

/// A symbolic link that another user planted on the way to the keychain (in /tmp, where anyone may
/// create one) is not followed: its owner could point it anywhere, and did, at a directory of the
/// caller's that the keychain then made private and filled.
final class PlantedLinkTests: EngineTestCase {
    func testALinkOnTheWayThatBelongsToSomeoneElseIsRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to give a link to another user")
        keychain = nil
        let target = directory + "-public"
        let link = directory + "-link"
        defer {
            try? FileManager.default.removeItem(atPath: target)
            unlink(link)
        }
        XCTAssertEqual(mkdir(target, 0o755), 0)
        XCTAssertEqual(chmod(target, 0o755), 0)
        XCTAssertEqual(symlink(target, link), 0)
        XCTAssertEqual(lchown(link, 65534, 65534), 0)
        let lines = LogCollector()
        KeychainLog.setSink { lines.append($0) }
        assertError(.notAvailable("")) { _ = try open(directory: link) }
        assertError(.notAvailable("")) { _ = try open(directory: link + "/keychain") }
        XCTAssertTrue(
            lines.all.allSatisfy { $0.contains("symbolic link on the way belongs to user 65534") }, "\(lines.all)")
        XCTAssertEqual(SecureFiles.permissions(of: target), 0o755, "the link's target was left as it was")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: target), [])
        // The caller's own link is followed.
        XCTAssertEqual(lchown(link, geteuid(), getegid()), 0)
        XCTAssertNoThrow(try open(directory: link))
    }
}
