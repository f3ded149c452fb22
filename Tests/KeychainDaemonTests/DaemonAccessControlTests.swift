import Foundation
import KeychainBytes
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

    func testTheDaemonAsksForThePasscodeWithItsOwnPromptNeverTheClients() throws {
        let passcodeItem = AccessControlPolicy(
            protection: .whenUnlocked, flags: AccessControlPolicy.Flag.devicePasscode)
        let pinentry = try FakePinentry(.passcode("1357"))
        // A daemon with no prompt program: a client naming one of its own changes nothing.
        let first = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try first.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.shared"])
        try first.register(groups: ["TEAM.shared"])
        try first.service().setPasscode(SecureBytesHelper.bytes("1357"), current: nil)
        _ = try first.service().add([
            "class": .string("genp"), "svce": .string("pc"), "acct": .string("me"),
            "v_Data": .data(Data("passcode-guarded".utf8)), "accc": .accessControl(passcodeItem),
        ])
        let claimed = try ClientPrograms.run(
            app, ["read", "pc", "me"], daemon: first, environment: ["KEYCHAIN_PINENTRY": pinentry.path])
        XCTAssertEqual(claimed.output, "status -25293")
        XCTAssertEqual(pinentry.transcript, "", "the client's prompt program was never run")

        // The daemon's own prompt: it asks, checks the passcode against the keybag, and answers.
        first.stop()
        let daemon = try TestDaemon(arguments: ["--pinentry", pinentry.path], home: first.home)
        try daemon.service().unlock(passcode: SecureBytesHelper.bytes("1357"))  // a restart is a reboot
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "pc", "me"], daemon: daemon).output, "passcode-guarded")
        XCTAssertTrue(pinentry.transcript.contains("GETPIN"), pinentry.transcript)
    }

    func testADaemonTakesBiometryFromFprintd() throws {
        let bus = try TestBus()
        let fprintd = try FakeFprintd(bus: bus)
        defer { fprintd.stop() }
        let daemon = try TestDaemon(
            arguments: ["--biometry", "fprintd"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        try daemon.register(groups: ["TEAM.shared"])
        let service = daemon.service()
        XCTAssertTrue(try service.biometry(.status).enrolled)
        _ = try service.add([
            "class": .string("genp"), "svce": .string("fp"), "acct": .string("me"),
            "v_Data": .data(Data("fingerprint-guarded".utf8)), "accc": .accessControl(guarded),
        ])
        let query: [String: ItemValue] = [
            "class": .string("genp"), "svce": .string("fp"), "acct": .string("me"), "r_Data": .bool(true),
        ]
        XCTAssertEqual(try service.copyMatching(query), .data(Data("fingerprint-guarded".utf8)))
        fprintd.setResults([("verify-no-match", true)])
        XCTAssertThrowsError(try service.copyMatching(query)) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .authenticationFailed)
        }
        XCTAssertEqual(fprintd.verifications, 2)
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
