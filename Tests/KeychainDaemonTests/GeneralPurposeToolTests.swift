import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainTestSupport
import XCTest

@testable import KeychainDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// A registered general-purpose program (the `security` command, an interpreter) runs whatever any
/// process of its user tells it: its reads of secrets are granted only after the user is asked.
final class GeneralPurposeToolTests: XCTestCase {
    func testTheRegisteredCommandReadsSecretsOnlyAfterTheUserIsAsked() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let pinentry = try FakePinentry(.cancel)
        let daemon = try TestDaemon(arguments: ["--system", "--pinentry", pinentry.path])
        let programs = try ClientPrograms()
        let app = try programs.app("mail")
        let security = ClientPrograms.built("security")
        let user: uid_t = 65534
        XCTAssertEqual(
            try ClientPrograms.run(security, ["set-keychain-password", "-p", "8642"], daemon: daemon, user: user)
                .status,
            0)
        for (program, identifier) in [(app, "TEAM.mail"), (security, "security")] {
            let result = try ClientPrograms.run(
                security,
                [
                    "app", "register", program, "--application-identifier", identifier, "--access-group", "TEAM.mail",
                    "-p", "8642",
                ],
                daemon: daemon, user: user)
            XCTAssertEqual(result.status, 0, result.output)
        }
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "imap", "me", "mail-secret"], daemon: daemon, user: user).output,
            "status 0")
        let listing = try ClientPrograms.run(security, ["app", "list"], daemon: daemon, user: user).output
        XCTAssertTrue(listing.contains("reads of secrets: ask the user"), listing)

        // Any process of the user runs the registered command: the user is asked, and says no.
        let find = ["find-generic-password", "-s", "imap", "-a", "me", "-w"]
        var result = try ClientPrograms.run(security, find, daemon: daemon, user: user)
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: -128) & 0xff), result.output)
        XCTAssertFalse(result.output.contains("mail-secret"))
        XCTAssertTrue(pinentry.transcript.contains("wants to read or change a secret of security"), pinentry.transcript)
        // Without a terminal nothing is reused: the next read asks again, and the user's passcode opens it.
        try pinentry.set(.passcode("8642"))
        result = try ClientPrograms.run(security, find, daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(result.output, "mail-secret")
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 2)
        // Attributes are no secret: listing them asks nobody.
        try pinentry.set(.cancel)
        result = try ClientPrograms.run(security, ["find-generic-password", "-s", "imap"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 2)
        // Changes ask too: a process of the user cannot replace or remove another app's secret through it.
        result = try ClientPrograms.run(
            security, ["delete-generic-password", "-s", "imap", "-a", "me"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: -128) & 0xff), result.output)
        result = try ClientPrograms.run(
            security, ["add-generic-password", "-s", "imap", "-a", "me", "-U", "-w", "planted"], daemon: daemon,
            user: user)
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: -128) & 0xff), result.output)
        // The app itself is no tool: it reads without anyone asked, and its secret is as it was.
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "imap", "me"], daemon: daemon, user: user).output, "mail-secret")
    }

    /// The daemon knows the command by its contents: a registration that does not say it is a tool (an
    /// older client's, or any other registrar's) makes one all the same, and so does an entry written
    /// before tools existed, which has no such field at all.
    func testTheCommandIsAToolWhateverItsEntrySays() throws {
        let pinentry = try FakePinentry(.cancel)
        let daemon = try TestDaemon(arguments: ["--pinentry", pinentry.path])
        let security = ClientPrograms.built("security")
        try daemon.service().setPasscode(SecureBytesHelper.bytes("2468"), current: nil)
        try daemon.register(executable: security, identifier: "security", groups: ["security"])
        XCTAssertEqual(try daemon.service().listApps().first?.isGeneralPurposeTool, true)
        // The same entry as a registry of before: rewritten without the tool fields, with its MAC.
        daemon.stop()
        try Self.rewriteRegistryWithoutToolFields(in: daemon.home)
        try daemon.start()
        try daemon.service().unlock(passcode: SecureBytesHelper.bytes("2468"))
        XCTAssertEqual(try daemon.service().listApps().first?.isGeneralPurposeTool, false)
        let result = try ClientPrograms.run(
            security, ["find-generic-password", "-s", "anything", "-w"], daemon: daemon)
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: -128) & 0xff), result.output)
        XCTAssertTrue(pinentry.transcript.contains("GETPIN"), "the user was not asked")
    }

    /// Writes the registry in `home` as a build from before tools wrote it: the entries without
    /// `asksUser` and `approvalReuseSeconds`, under a fresh MAC from the keychain's root.
    private static func rewriteRegistryWithoutToolFields(in home: String) throws {
        let path = home + "/apps.registry"
        let contents = try Data(contentsOf: URL(fileURLWithPath: path))
        let newline = try XCTUnwrap(contents.firstIndex(of: 10))
        var document = try XCTUnwrap(
            JSONSerialization.jsonObject(with: contents[(newline + 1)...]) as? [String: Any])
        let apps = try XCTUnwrap(document["apps"] as? [[String: Any]])
        document["apps"] = apps.map { app in
            app.filter { $0.key != "asksUser" && $0.key != "approvalReuseSeconds" }
        }
        let rewritten = try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])
        let keychain = try Keychain(directory: home)
        let mac = Hex.encode(try keychain.authenticationCode(for: rewritten))
        try (Data(mac.utf8) + Data([10]) + rewritten).write(to: URL(fileURLWithPath: path))
    }

    func testAnInterpreterIsRegisteredOnlyWhenAllowedAndThenAsks() throws {
        let daemon = try TestDaemon()
        let security = ClientPrograms.built("security")
        let shell = "/bin/sh"
        var result = try ClientPrograms.run(
            security, ["app", "register", shell, "--application-identifier", "script", "--access-group", "TEAM.s"],
            daemon: daemon)
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: -50) & 0xff), result.output)
        XCTAssertTrue(result.output.contains("is an interpreter"), result.output)
        XCTAssertEqual(try daemon.service().listApps().count, 0)
        result = try ClientPrograms.run(
            security,
            [
                "app", "register", shell, "--application-identifier", "script", "--access-group", "TEAM.s",
                "--allow-interpreter", "--approval-reuse", "0",
            ],
            daemon: daemon)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("warning: an interpreter registered as an app"), result.output)
        let apps = try daemon.service().listApps()
        XCTAssertEqual(apps.count, 1)
        XCTAssertEqual(apps.first?.isGeneralPurposeTool, true)
        XCTAssertEqual(apps.first?.approvalReuseSeconds ?? 0, 0)
    }

    func testACopyOfAnInterpreterUnderAnotherNameIsStillAnInterpreter() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let disguised = programs.directory + "/myapp"
        let shell = URL(fileURLWithPath: "/bin/sh").resolvingSymlinksInPath().path
        try FileManager.default.copyItem(atPath: shell, toPath: disguised)
        chmod(disguised, 0o755)
        let result = try ClientPrograms.run(
            ClientPrograms.built("security"),
            ["app", "register", disguised, "--application-identifier", "myapp", "--access-group", "TEAM.m"],
            daemon: daemon)
        XCTAssertNotEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("is an interpreter"), result.output)
        XCTAssertTrue(ToolRecognition.isCopyOfAnInterpreter(disguised))
        XCTAssertFalse(ToolRecognition.isCopyOfAnInterpreter(ClientPrograms.built("keychain-test-helper")))
    }

    /// A tool's requests that reveal no secret (listing items) ask nobody, so they do not count as the
    /// user's activity either: any process of the user could otherwise hold off the idle lock with them.
    func testAToolsUnapprovedRequestsDoNotHoldOffTheIdleLock() throws {
        let daemon = try TestDaemon(arguments: ["--system", "--idle-lock", "2"])
        let security = ClientPrograms.built("security")
        let register = try ClientPrograms.run(
            security, ["app", "register", security, "--application-identifier", "security"], daemon: daemon)
        XCTAssertEqual(register.status, 0, register.output)
        try daemon.service().setPasscode(SecureBytesHelper.bytes("1357"), current: nil)
        let deadline = Date().addingTimeInterval(6)
        var locked = false
        while Date() < deadline, !locked {
            XCTAssertEqual(try ClientPrograms.run(security, ["list-items"], daemon: daemon).status, 0)
            locked = try daemon.service().status().lockState == .locked
            usleep(200_000)
        }
        XCTAssertTrue(locked, "listing through the tool kept the keychain unlocked: \(daemon.log)")
    }

    func testTheDaemonKnowsInterpretersByName() {
        for name in [
            "/usr/bin/python3", "/usr/bin/python3.11", "/usr/bin/perl", "/usr/bin/perl5.36.0", "/bin/bash",
            "/usr/bin/dash", "/usr/bin/node", "/usr/bin/ruby3.1", "/usr/bin/lua5.4", "/usr/bin/env",
        ] {
            XCTAssertTrue(ToolRecognition.isInterpreter(name), name)
        }
        for name in ["/usr/bin/myapp", "/usr/local/bin/security", "/usr/bin/pythonic-tool", "/opt/app/perlish"] {
            XCTAssertFalse(ToolRecognition.isInterpreter(name), name)
        }
    }
}

/// A general-purpose tool run on a terminal with no graphical session (over SSH): the daemon's terminal
/// pinentry asks on the command's own terminal.
final class ToolApprovalOnTheTerminalTests: XCTestCase {
    func testTheApprovalIsAskedOnTheCommandsTerminal() throws {
        let curses = "/usr/bin/pinentry-curses"
        guard FileManager.default.isExecutableFile(atPath: curses),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/script")
        else { throw XCTSkip("needs pinentry-curses and script (bsdutils)") }
        let user: uid_t? = canSwitchUsers ? 65534 : nil
        let daemon = try TestDaemon(arguments: ["--pinentry", curses], user: user)
        let security = ClientPrograms.built("security")
        func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
            try ClientPrograms.run(security, arguments, daemon: daemon, user: user)
        }
        XCTAssertEqual(try run(["set-keychain-password", "-p", "2580"]).status, 0)
        XCTAssertEqual(
            try run(["app", "register", security, "--application-identifier", "security", "-p", "2580"]).status, 0)
        // Without a terminal (and no display) the prompt cannot ask anyone: a change is refused.
        XCTAssertNotEqual(try run(["add-generic-password", "-s", "web", "-a", "me", "-w", "tty-secret"]).status, 0)
        /// Runs the command on a terminal of its own, typing the passcode there once the prompt has
        /// had time to show.
        func onTerminal(_ arguments: String) throws -> String {
            try ClientPrograms.run(
                "/bin/sh",
                [
                    "-c",
                    "(for attempt in 1 2 3 4 5 6 7 8; do sleep 1.5; printf '2580\\r'; done) | /usr/bin/script -qec '\(security) \(arguments)' /dev/null",
                ],
                daemon: daemon, user: user
            ).output
        }
        _ = try onTerminal("add-generic-password -s web -a me -w tty-secret")
        let found = try onTerminal("find-generic-password -s web -a me -w")
        XCTAssertTrue(found.contains("tty-secret"), found)
        // The prompt was drawn on the command's terminal (its reason wraps where the dialog's width
        // puts it, so the field's label is what is looked for).
        XCTAssertTrue(found.contains("Passcode:"), found)
    }
}
