import Foundation
import Security
import XCTest

/// `security biometry` and `security companion`: the simulated sensor and companion device, driven from
/// the shell while an app waits, as the iOS Simulator's Face ID menu is.
final class SensorVerbTests: XCTestCase {
    private var cli: CommandRunner!

    override func setUp() { cli = CommandRunner() }
    override func tearDown() { cli = nil }

    func testTheSensorIsEnrolledAnsweredAndShown() throws {
        var status = try cli.run("biometry", "status")
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.stdout.hasPrefix("enrolled: no\n"), status.stdout)
        XCTAssertEqual(try cli.run("biometry", "enroll").status, 0)
        XCTAssertEqual(try cli.run("biometry", "match").status, 0)
        XCTAssertEqual(try cli.run("biometry", "cancel").status, 0)
        XCTAssertEqual(try cli.run("biometry", "policy", "nomatch").status, 0)
        status = try cli.run("biometry", "status")
        XCTAssertTrue(status.stdout.contains("enrolled: yes"), status.stdout)
        XCTAssertTrue(status.stdout.contains("answers waiting: match, cancel"), status.stdout)
        XCTAssertTrue(status.stdout.contains("standing answer: nomatch"), status.stdout)
        let domain = status.stdout.split(separator: "\n").first { $0.hasPrefix("domain state: ") }
        XCTAssertEqual(domain?.count, "domain state: ".count + 64)
        // A new enrollment is a new domain state.
        XCTAssertEqual(try cli.run("biometry", "enroll").status, 0)
        let again = try cli.run("biometry", "status").stdout.split(separator: "\n").first {
            $0.hasPrefix("domain state: ")
        }
        XCTAssertNotEqual(domain, again)
        XCTAssertEqual(try cli.run("biometry", "policy", "ask").status, 0)
        XCTAssertTrue(try cli.run("biometry", "status").stdout.contains("standing answer: none"))
    }

    func testTheCompanionIsPairedSeparately() throws {
        // No companion unless one is simulated on purpose.
        let refused = try cli.run("companion", "pair")
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("no companion device is simulated here"), refused.stderr)
        cli.extraEnvironment["KEYCHAIN_COMPANION"] = "simulated"
        XCTAssertEqual(try cli.run("companion", "pair").status, 0)
        XCTAssertTrue(try cli.run("companion", "status").stdout.hasPrefix("paired: yes\n"))
        XCTAssertTrue(try cli.run("biometry", "status").stdout.hasPrefix("enrolled: no\n"))
        XCTAssertEqual(try cli.run("companion", "unpair").status, 0)
        XCTAssertTrue(try cli.run("companion", "status").stdout.hasPrefix("paired: no\n"))
    }

    func testBadSensorCommandsAreUsageErrors() throws {
        for arguments in [
            ["biometry"], ["biometry", "smile"], ["biometry", "policy"], ["biometry", "policy", "maybe"],
            ["biometry", "match", "extra"], ["biometry", "pair"], ["companion", "enroll"],
        ] {
            let result = try cli.run(arguments)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("Usage:") || result.stderr.contains("security:"), result.stderr)
        }
    }
}
