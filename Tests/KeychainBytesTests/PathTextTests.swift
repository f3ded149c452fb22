import Foundation
import KeychainBytes
import XCTest

/// The path operations the lower modules use instead of NSString's agree with NSString's on the paths
/// the keychain makes.
final class PathTextTests: XCTestCase {
    private let paths = [
        "/", "/a", "/a/", "/a/b", "/a/b/", "a/b", "/tmp/keychain/keybag", "relative/dir/", "/with space/é/file.db",
    ]

    func testTheyAgreeWithNSString() {
        for path in paths {
            let string = path as NSString
            XCTAssertEqual(PathText.lastComponent(path), string.lastPathComponent, "last component of \"\(path)\"")
            XCTAssertEqual(PathText.parent(path), string.deletingLastPathComponent, "parent of \"\(path)\"")
            for name in ["keybag", "keychain/securityd.sock"] {
                XCTAssertEqual(
                    PathText.join(path, name), string.appendingPathComponent(name), "\"\(path)\" + \"\(name)\"")
            }
        }
    }

    /// Where NSString is odd (or traps, as corelibs' does for the parent of a one-component relative
    /// path): slashes alone, doubled slashes, nothing, a bare name.
    func testEdgesAreSettledPlainly() {
        XCTAssertEqual(PathText.parent("a"), "")
        XCTAssertEqual(PathText.parent("a/"), "")
        XCTAssertEqual(PathText.lastComponent("a/"), "a")
        XCTAssertEqual(PathText.join("//", "keybag"), "/keybag")
        XCTAssertEqual(PathText.join("", "keybag"), "keybag")
        XCTAssertEqual(PathText.parent("//"), "/")
        XCTAssertEqual(PathText.parent(""), "")
        XCTAssertEqual(PathText.parent("/a//b"), "/a")
        XCTAssertEqual(PathText.lastComponent("//"), "/")
        XCTAssertEqual(PathText.lastComponent(""), "")
        XCTAssertEqual(PathText.lastComponent("a//"), "a")
    }

    /// One spelling for two names of a path (the command compares a keychain name given on its line with
    /// its database's path): as the file system resolves it when it exists, else without repeated
    /// slashes, `.` components or a trailing slash.
    func testStandardizedGivesOneSpellingForAPath() throws {
        let directory = NSTemporaryDirectory() + "path-text-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/real", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: directory + "/real")
        let real = PathText.standardized(directory + "/real")
        XCTAssertEqual(PathText.standardized(directory + "/link"), real)
        XCTAssertEqual(PathText.standardized(directory + "//real/./"), real)
        XCTAssertEqual(PathText.standardized(directory + "/real/../real"), real)
        XCTAssertEqual(PathText.standardized("/missing-path-for-test//a/./b/"), "/missing-path-for-test/a/b")
        XCTAssertEqual(PathText.standardized("missing-relative/./x//"), "missing-relative/x")
    }

    func testTrimmingWhitespaceTakesSpacesTabsAndLineBreaksFromBothEnds() {
        XCTAssertEqual(" \t pid 42 (securityd)\n\n".trimmingWhitespace, "pid 42 (securityd)")
        XCTAssertEqual("\n \t".trimmingWhitespace, "")
        XCTAssertEqual("inner  space".trimmingWhitespace, "inner  space")
    }
}
