import Foundation
import KeychainCore
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Two registered apps with different access groups, as the daemon sees them: by their executables,
/// never by what they claim.
final class AppIsolationTests: XCTestCase {
    var daemon: TestDaemon!
    var programs: ClientPrograms!
    var appA = ""
    var appB = ""

    override func setUpWithError() throws {
        daemon = try TestDaemon()
        programs = try ClientPrograms()
        appA = try programs.app("app-a")
        appB = try programs.app("app-b")
        try daemon.register(executable: appA, identifier: "TEAM.a", groups: ["TEAM.a", "TEAM.shared"])
        try daemon.register(executable: appB, identifier: "TEAM.b", groups: ["TEAM.b", "TEAM.shared"])
    }

    override func tearDown() {
        daemon = nil
        programs = nil
    }

    func run(_ app: String, _ arguments: String..., environment: [String: String] = [:]) throws -> String {
        try ClientPrograms.run(app, arguments, daemon: daemon, environment: environment).output
    }

    func testAnAppCannotReadUpdateDeleteOrDetectAnotherAppsItems() throws {
        XCTAssertEqual(try run(appB, "put", "web", "bob", "b-secret"), "status 0")
        XCTAssertEqual(try run(appB, "read", "web", "bob"), "b-secret")
        // A sees nothing of it: not by reading, not by counting, not by updating or deleting it.
        XCTAssertEqual(try run(appA, "read", "web", "bob"), "status -25300")
        XCTAssertEqual(try run(appA, "count", "web"), "count 0")
        XCTAssertEqual(try run(appA, "update", "web", "bob", "stolen"), "status -25300")
        XCTAssertEqual(try run(appA, "remove", "web", "bob"), "status -25300")
        // Nor by adding the same key: A's item lands in A's group, beside B's, without a duplicate error.
        XCTAssertEqual(try run(appA, "put", "web", "bob", "a-secret"), "status 0")
        XCTAssertEqual(try run(appB, "read", "web", "bob"), "b-secret")
        XCTAssertEqual(try run(appA, "read", "web", "bob"), "a-secret")
        // Naming B's group explicitly is a missing entitlement.
        XCTAssertEqual(try run(appA, "put", "web", "carol", "x", "TEAM.b"), "status -34018")
        XCTAssertEqual(try run(appB, "groups", "web"), "groups TEAM.b")
    }

    func testASharedGroupWorksForBoth() throws {
        XCTAssertEqual(try run(appA, "put", "sync", "token", "shared-value", "TEAM.shared"), "status 0")
        XCTAssertEqual(try run(appB, "read", "sync", "token"), "shared-value")
        XCTAssertEqual(try run(appB, "update", "sync", "token", "changed-by-b"), "status 0")
        XCTAssertEqual(try run(appA, "read", "sync", "token"), "changed-by-b")
        XCTAssertEqual(try run(appB, "remove", "sync", "token"), "status 0")
        XCTAssertEqual(try run(appA, "read", "sync", "token"), "status -25300")
    }

    func testTheEnvironmentClaimsNothing() throws {
        XCTAssertEqual(try run(appB, "put", "web", "bob", "b-secret"), "status 0")
        // A claims B's groups the way the embedded keychain would believe.
        let claim = ["KEYCHAIN_ACCESS_GROUPS": "TEAM.b,TEAM.a"]
        XCTAssertEqual(try run(appA, "read", "web", "bob", environment: claim), "status -25300")
        XCTAssertEqual(try run(appA, "put", "web", "x", "y", "TEAM.b", environment: claim), "status -34018")
        XCTAssertEqual(try run(appA, "put", "web", "x", "y", environment: claim), "status 0")
        XCTAssertEqual(try run(appA, "groups", "web", environment: claim), "groups TEAM.a")
    }

    func testAnUnregisteredExecutableGetsMissingEntitlementOnEveryCall() throws {
        let stranger = try programs.app("stranger")
        XCTAssertEqual(try run(stranger, "put", "web", "x", "y"), "status -34018")
        XCTAssertEqual(try run(stranger, "read", "web", "x"), "status -34018")
        XCTAssertEqual(try run(stranger, "count", "web"), "status -34018")
        XCTAssertEqual(try run(stranger, "update", "web", "x", "z"), "status -34018")
        XCTAssertEqual(try run(stranger, "remove", "web", "x"), "status -34018")
        XCTAssertTrue(daemon.log.contains("is not registered"), daemon.log)
    }

    func testAChangedExecutableIsRefusedUntilRegisteredAgain() throws {
        XCTAssertEqual(try run(appA, "put", "web", "alice", "a-secret"), "status 0")
        // A rebuilt binary: different bytes at the registered path.
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: appA))
        handle.seekToEndOfFile()
        handle.write(Data("rebuilt".utf8))
        try handle.close()
        XCTAssertEqual(try run(appA, "read", "web", "alice"), "status -34018")
        XCTAssertTrue(daemon.log.contains("has changed since it was registered"), daemon.log)
        try daemon.register(executable: appA, identifier: "TEAM.a", groups: ["TEAM.a", "TEAM.shared"])
        XCTAssertEqual(try run(appA, "read", "web", "alice"), "a-secret")
    }

    func testAnExecutableDatedCenturiesAheadOrBeforeIsIdentifiedLikeAnyOther() throws {
        // The owner of a file sets its times at will: years whose nanoseconds overflow 64 bits.
        for seconds in [13_569_465_600, -13_569_465_600] {  // 2400-01-01 and 1540-01-01
            var times = [
                timespec(tv_sec: seconds, tv_nsec: 999_999_999), timespec(tv_sec: seconds, tv_nsec: 999_999_999),
            ]
            XCTAssertEqual(utimensat(AT_FDCWD, appA, &times, 0), 0)
            try daemon.register(executable: appA, identifier: "TEAM.a", groups: ["TEAM.a"])
            XCTAssertEqual(try run(appA, "put", "dated", "\(seconds)", "v"), "status 0", daemon.log)
            XCTAssertEqual(try run(appA, "read", "dated", "\(seconds)"), "v")
        }
        XCTAssertEqual(daemon.process.isRunning, true)
    }

    func testAnAppRemovedFromTheRegistryLosesAccessAndAnAppWithoutGroupsUsesItsIdentifier() throws {
        try daemon.service().removeApp(executablePath: appA, passcode: nil)
        XCTAssertEqual(try run(appA, "put", "web", "x", "y"), "status -34018")
        try daemon.register(executable: appA, identifier: "TEAM.only", groups: [])
        XCTAssertEqual(try run(appA, "put", "web", "x", "y"), "status 0")
        XCTAssertEqual(try run(appA, "groups", "web"), "groups TEAM.only")
        XCTAssertThrowsError(try daemon.service().removeApp(executablePath: "/no/such/app", passcode: nil)) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .itemNotFound)
        }
    }

    func testDevelopmentEntriesTrustAPathOnlyWhenTheDaemonRunsForDevelopment() throws {
        // Not in a normal daemon: such an entry cannot even be made.
        XCTAssertThrowsError(try daemon.register(executable: appA, groups: ["TEAM.dev"], development: true)) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .invalidParameter)
        }
        let development = try TestDaemon(arguments: ["--development"])
        try development.register(executable: appA, identifier: "TEAM.dev", groups: ["TEAM.dev"], development: true)
        XCTAssertEqual(try ClientPrograms.run(appA, ["put", "dev", "a", "v"], daemon: development).output, "status 0")
        // Rebuilt: still trusted, by path.
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: appA))
        handle.seekToEndOfFile()
        handle.write(Data("rebuilt".utf8))
        try handle.close()
        XCTAssertEqual(try ClientPrograms.run(appA, ["read", "dev", "a"], daemon: development).output, "v")
        // And `security app list` says so.
        let list = try ClientPrograms.run(ClientPrograms.built("security"), ["app", "list"], daemon: development)
        XCTAssertEqual(list.status, 0, list.output)
        XCTAssertTrue(list.output.contains("development: trusted by path"), list.output)
    }

    func testTheSecurityCommandManagesTheRegistry() throws {
        let security = ClientPrograms.built("security")
        let stranger = try programs.app("stranger")
        var result = try ClientPrograms.run(
            security,
            [
                "app", "register", stranger, "--application-identifier", "TEAM.s", "--access-group", "TEAM.s",
                "--access-group", "TEAM.shared",
            ], daemon: daemon)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(try run(stranger, "put", "cli", "a", "v"), "status 0")
        XCTAssertEqual(try run(stranger, "groups", "cli"), "groups TEAM.s")
        result = try ClientPrograms.run(security, ["app", "list"], daemon: daemon)
        XCTAssertTrue(result.output.contains(stranger), result.output)
        XCTAssertTrue(result.output.contains("access groups: TEAM.s, TEAM.shared"), result.output)
        XCTAssertTrue(result.output.contains("sha256 "), result.output)
        result = try ClientPrograms.run(security, ["app", "remove", stranger], daemon: daemon)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(try run(stranger, "read", "cli", "a"), "status -34018")
        // The embedded keychain has no registry.
        result = try ClientPrograms.run(security, ["app", "list"], daemon: nil)
        XCTAssertEqual(result.status, 53, result.output)  // errSecNotAvailable (-25291), as macOS exits
    }
}
