import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import XCTest

/// Every identity check fails closed: a process whose environment cannot be read whole is refused.
final class IdentityFailsClosedTests: XCTestCase {
    func testAProcessThatHidesItsEnvironmentIsRefused() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("hider")
        try daemon.register(executable: app, identifier: "TEAM.hide", groups: ["TEAM.hide"])
        XCTAssertEqual(try ClientPrograms.run(app, ["put", "web", "me", "hidden"], daemon: daemon).output, "status 0")
        // An environment of several pages, so that whole pages of it can be unmapped.
        let padding = ["PADDING": String(repeating: "x", count: 20_000)]
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "me"], daemon: daemon, environment: padding).output, "hidden")
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read-hiding-environment", "web", "me"], daemon: daemon, environment: padding)
                .output, "status -34018", daemon.log)
        XCTAssertTrue(daemon.log.contains("environment the daemon cannot read"), daemon.log)
    }

    /// Code that no file backs: a preloaded library can rename its variable in place (the environment
    /// then reads whole and clean) and move itself into anonymous memory (no path names it); what is
    /// left to see is executable memory without a file, and that is refused.
    func testAProcessRunningCodeThatNoFileBacksIsRefused() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("jit")
        try daemon.register(executable: app, identifier: "TEAM.jit", groups: ["TEAM.jit"])
        XCTAssertEqual(try ClientPrograms.run(app, ["put", "web", "me", "plain"], daemon: daemon).output, "status 0")
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read-with-runtime-code", "web", "me"], daemon: daemon).output,
            "status -34018", daemon.log)
        XCTAssertTrue(daemon.log.contains("executable memory that no file backs"), daemon.log)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "me"], daemon: daemon).output, "plain")
    }
}
