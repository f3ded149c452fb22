import KeychainBytes
import XCTest

@testable import KeychainCore

/// Default locations are built from variables that may end in a slash (or be one), without Foundation's
/// path objects: a joined path has exactly one slash between its parts.
final class KeychainLocationsTests: XCTestCase {
    func testAPartIsJoinedWithOneSlash() {
        XCTAssertEqual(
            PathText.join("/run/user/1000", "keychain/securityd.sock"),
            "/run/user/1000/keychain/securityd.sock")
        XCTAssertEqual(PathText.join("/home/me/", ".local/share/keychain"), "/home/me/.local/share/keychain")
        XCTAssertEqual(PathText.join("/data//", "keychain"), "/data/keychain")
        XCTAssertEqual(PathText.join("/", "keychain"), "/keychain")
        XCTAssertEqual(PathText.join("//", "keychain"), "/keychain")
        XCTAssertEqual(PathText.join("relative", "keychain"), "relative/keychain")
        XCTAssertEqual(PathText.join("", "keychain"), "keychain")
    }

    func testTheHomeDirectoryComesFromTheUserDatabase() throws {
        let home = try XCTUnwrap(KeychainLocations.homeDirectory(of: 0))
        XCTAssertTrue(home.hasPrefix("/"), home)
        XCTAssertEqual(KeychainLocations.userName(of: 0), "root")
    }
}
