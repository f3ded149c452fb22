import Foundation
import KeychainCore
import KeychainCrypto
import KeychainTestSupport
import XCTest

/// Access control through the daemon: the daemon's authenticators decide, and what a context has
/// evaluated belongs to the process that evaluated it.
final class DaemonAccessControlTests: XCTestCase {
    private let guarded = AccessControlPolicy(protection: .whenUnlocked, flags: AccessControlPolicy.Flag.biometryAny)

    func testAContextEvaluatedByOneProcessSatisfiesNothingForAnother() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.shared"])
        try daemon.register(groups: ["TEAM.shared"])
        let service = daemon.service()
        _ = try service.biometry(.enroll)
        _ = try service.add([
            "class": .string("genp"), "svce": .string("acl"), "acct": .string("me"),
            "v_Data": .data(Data("guarded".utf8)), "accc": .accessControl(guarded),
        ])
        // This process evaluates a context with a match.
        let context = AuthenticationContextReference(interactionNotAllowed: false)
        _ = try service.biometry(.answer(.match))
        let outcome = try service.authenticate(
            AuthenticationRequest(context: context, subject: .policy(.biometrics), preflight: false, reason: "test"))
        XCTAssertNil(outcome.failure)
        XCTAssertNotNil(outcome.domainState)
        _ = try service.biometry(.standingAnswer(.nomatch))  // any prompt from now on fails
        let quiet = AuthenticationContextReference(identifier: context.identifier, interactionNotAllowed: true)
        let query: [String: ItemValue] = [
            "class": .string("genp"), "svce": .string("acl"), "acct": .string("me"), "r_Data": .bool(true),
            "u_AuthCtx": .authenticationContext(quiet),
        ]
        XCTAssertEqual(try service.copyMatching(query), .data(Data("guarded".utf8)))
        // Another process names the same identifier: it evaluated nothing, and may not ask.
        let claimed = try ClientPrograms.run(
            app, ["read-claiming", "acl", "me", context.identifier.uuidString], daemon: daemon)
        XCTAssertEqual(claimed.output, "status -25308")
        // A restarted daemon remembers no context: a reboot.
        daemon.stop()
        try daemon.start()
        XCTAssertThrowsError(try daemon.service().copyMatching(query)) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .interactionNotAllowed)
        }
    }

    func testASystemDaemonsSensorIsDrivenOnlyByRootOrInDevelopment() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system"])
        let security = ClientPrograms.built("security")
        // A user's own process cannot answer the sensor for its own prompts.
        let answered = try ClientPrograms.run(security, ["biometry", "match"], daemon: daemon, user: 65534)
        XCTAssertNotEqual(answered.status, 0, answered.output)
        XCTAssertTrue(answered.output.contains("root or in development mode"), answered.output)
        let status = try ClientPrograms.run(security, ["biometry", "status"], daemon: daemon, user: 65534)
        XCTAssertEqual(status.status, 0, status.output)
        XCTAssertTrue(status.output.contains("enrolled: no"), status.output)
        // Root drives the sensor of its own keychain.
        XCTAssertEqual(try ClientPrograms.run(security, ["biometry", "enroll"], daemon: daemon).status, 0)
    }
}
