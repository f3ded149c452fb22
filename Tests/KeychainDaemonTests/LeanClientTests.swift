import Foundation
import KeychainTestSupport
import XCTest

/// `keychain-bench-lean-client`, the benchmark's client built from the modules below the facade
/// alone: it finds a secret through the daemon as the command does, and is identified and refused
/// like any other program.
final class LeanClientTests: XCTestCase {
    func testTheLeanClientReadsThroughTheDaemonOnlyOnceRegistered() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        let lean = try programs.copy(ClientPrograms.built("keychain-bench-lean-client"), as: "lean")
        try daemon.register(executable: app, identifier: "TEAM.app", groups: ["TEAM.shared"])
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "alice", "s3cret"], daemon: daemon).output, "status 0")

        var result = try ClientPrograms.run(lean, ["web", "alice"], daemon: daemon)
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.output.contains("is not registered"), result.output)

        try daemon.register(executable: lean, identifier: "TEAM.lean", groups: ["TEAM.shared"])
        result = try ClientPrograms.run(lean, ["web", "alice"], daemon: daemon)
        XCTAssertEqual(result.status, 0, result.output + daemon.log)
        XCTAssertEqual(result.output, "s3cret")
        result = try ClientPrograms.run(lean, ["web", "bob"], daemon: daemon)
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.output.contains("keychain-bench-lean-client:"), result.output)
        XCTAssertEqual(try ClientPrograms.run(lean, ["web"], daemon: daemon).status, 2, "usage")
    }
}
