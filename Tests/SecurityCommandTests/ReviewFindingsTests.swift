import Foundation
import XCTest

/// The smaller findings of the outside review of the `security` command, each as it was reproduced.
final class ReviewFindingsTests: XCTestCase {
    private var cli: CommandRunner!

    override func setUp() { cli = CommandRunner() }
    override func tearDown() { cli = nil }

    /// Without a terminal, `set-keychain-password` took the new passcode only as `-p`, where every user
    /// sees it in `ps`. Standard input now gives the passcodes, one per line.
    func testPasscodesFromStandardInput() throws {
        XCTAssertEqual(try cli.run(["set-keychain-password"], input: "2468\n").status, 0)
        XCTAssertEqual(try cli.run(["unlock-keychain"], input: "2468\n").status, 0)
        // Change: the current passcode, then the new one.
        XCTAssertEqual(try cli.run(["set-keychain-password"], input: "2468\n1357\n").status, 0)
        XCTAssertEqual(try cli.run(["unlock-keychain"], input: "2468\n").status, 51, "the old one no longer opens")
        XCTAssertEqual(try cli.run(["unlock-keychain"], input: "1357\n").status, 0)
        let missing = try cli.run(["set-keychain-password"], input: "1357\n")
        XCTAssertEqual(missing.status, 2, "no new passcode given: \(missing.stderr)")
    }
}
