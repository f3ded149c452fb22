import Foundation
import KeychainCore
import KeychainTestSupport
import Security
import SecurityCommandLine
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The rough edges a new user hit (issue 17), each as it showed.
final class NewUserTests: XCTestCase {
    private var cli: CommandRunner!

    override func setUp() { cli = CommandRunner() }
    override func tearDown() { cli = nil }

    private static let missingEntitlementExit = Int32(UInt32(bitPattern: errSecMissingEntitlement) & 0xff)

    /// Every -34018 through the daemon said "the keychain daemon does not know this executable", even
    /// for a registered one refused for another reason. The daemon's own reason is shown now.
    func testTheDaemonsRefusalReasonIsShown() throws {
        let daemon = try TestDaemon()
        cli.extraEnvironment["KEYCHAIN_SOCKET"] = daemon.socket
        // The attribute search goes through the Security API (in the command's full half, which the daemon
        // sees calling), `-w` to the service directly (in the lean half): the same reason, for the half
        // that asked.
        for (password, caller) in [([], cli.executable + "-full"), (["-w"], cli.executable)] {
            let unknown = try cli.run(["find-generic-password", "-s", "refused"] + password)
            XCTAssertEqual(unknown.status, Self.missingEntitlementExit, unknown.stderr)
            XCTAssertTrue(
                unknown.stderr.contains("\(caller) is not registered with the keychain daemon"), unknown.stderr)
        }

        try registerTheCommandAndStore(service: "refused")

        // Registered, but run with a loader variable: refused for that, and the message says so.
        cli.extraEnvironment["LD_LIBRARY_PATH"] = cli.home + "/no-libraries-here"
        for password in [[], ["-w"]] {
            let loader = try cli.run(["find-generic-password", "-s", "refused"] + password)
            XCTAssertEqual(loader.status, Self.missingEntitlementExit, loader.stderr)
            XCTAssertTrue(loader.stderr.contains("runs with LD_LIBRARY_PATH set"), loader.stderr)
            XCTAssertFalse(loader.stderr.contains("not registered"), loader.stderr)
            XCTAssertFalse(loader.stderr.contains("does not know this executable"), loader.stderr)
        }
    }

    /// Registers the command with the daemon `cli` names and stores the password "pw" for `service`. The
    /// command is a general-purpose tool: the simulated sensor says yes for the user.
    private func registerTheCommandAndStore(service: String) throws {
        let registered = try cli.run(
            "app", "register", cli.executable, "--application-identifier", "security", "--access-group", "security")
        XCTAssertEqual(registered.status, 0, registered.stderr)
        XCTAssertEqual(try cli.run("biometry", "enroll").status, 0)
        XCTAssertEqual(try cli.run("biometry", "policy", "match").status, 0)
        XCTAssertEqual(try cli.run("add-generic-password", "-s", service, "-a", "a", "-w", "pw").status, 0)
    }

    /// Through the daemon a lookup needs neither SQLite nor OpenSSL: the running command loads none of
    /// libsqlite3, libssl and libcrypto (each is loaded on first use), as the dynamic loader's own trace
    /// shows.
    func testALookupThroughTheDaemonLoadsNeitherSQLiteNorOpenSSL() throws {
        let daemon = try TestDaemon()
        cli.extraEnvironment["KEYCHAIN_SOCKET"] = daemon.socket
        try registerTheCommandAndStore(service: "traced")
        cli.extraEnvironment["LD_DEBUG"] = "files"
        let found = try cli.run("find-generic-password", "-s", "traced", "-w")
        XCTAssertEqual(found.status, 0, found.stderr)
        XCTAssertEqual(found.stdout, "pw\n")
        XCTAssertTrue(found.stderr.contains("libc.so.6"), "the loader's trace is there: \(found.stderr)")
        XCTAssertFalse(found.stderr.contains("libsqlite3"), found.stderr)
        XCTAssertFalse(found.stderr.contains("libssl"), found.stderr)
        XCTAssertFalse(found.stderr.contains("libcrypto"), found.stderr)
    }

    /// A socket left behind by a daemon that stopped: item verbs said only "No keychain is available.
    /// You may need to restart your computer." (53); they name the daemon that is not running now.
    func testAStoppedDaemonIsNamed() throws {
        let directory = cli.home + "-run"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socketPath = directory + "/securityd.sock"
        try Self.leaveSocketWithoutListener(at: socketPath)
        cli.extraEnvironment["KEYCHAIN_SOCKET"] = socketPath

        for arguments in [
            ["find-generic-password", "-s", "gone"], ["add-generic-password", "-s", "gone", "-a", "a", "-w", "pw"],
            ["delete-generic-password", "-s", "gone"], ["dump-keychain"],
        ] {
            let result = try cli.run(arguments)
            XCTAssertEqual(result.status, 53, "\(arguments): \(result.stderr)")
            XCTAssertTrue(
                result.stderr.contains("(the keychain daemon at \(socketPath) is not running"),
                "\(arguments): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("pw"), "secrets never appear in messages")
        }
    }

    /// `app register` of a path through a symbolic link stored the resolved path (the daemon resolves
    /// it), and `app remove` of the same path then failed with 44: both resolve it now.
    func testRegisterAndRemoveAgreeThroughASymbolicLink() throws {
        let daemon = try TestDaemon()
        cli.extraEnvironment["KEYCHAIN_SOCKET"] = daemon.socket
        let links = cli.home + "-links"
        try FileManager.default.createDirectory(atPath: links, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: links) }
        let link = links + "/security"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: cli.executable)

        let registered = try cli.run(
            "app", "register", link, "--application-identifier", "security", "--access-group", "security")
        XCTAssertEqual(registered.status, 0, registered.stderr)
        let listed = try cli.run("app", "list")
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let paths = listed.stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") }
        XCTAssertEqual(
            paths.sorted(), [Substring(cli.executable), Substring(cli.executable + "-full")],
            "the stored path is the link's target, and the command's other half is registered with it")

        let removed = try cli.run("app", "remove", link)
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertEqual(try cli.run("app", "list").stdout, "no apps registered\n", "the entry is gone")
        XCTAssertEqual(try cli.run("app", "remove", link).status, 44, "nothing left to remove")
    }

    /// Registering the command with `--access-group TEAM.shared` alone hid every item stored embedded
    /// (group `security`) without a word: `app register` says so now, and how to keep them.
    func testRegisteringTheCommandWithoutItsEmbeddedGroupWarns() throws {
        let daemon = try TestDaemon()
        cli.extraEnvironment["KEYCHAIN_SOCKET"] = daemon.socket
        let note = "items stored without a daemon are in access group \"security\""

        let shared = try cli.run(
            "app", "register", cli.executable, "--application-identifier", "security", "--access-group", "TEAM.shared")
        XCTAssertEqual(shared.status, 0, shared.stderr)
        XCTAssertTrue(shared.stderr.contains(note), shared.stderr)
        XCTAssertTrue(
            shared.stderr.contains("--access-group security --access-group TEAM.shared"), shared.stderr)

        let both = try cli.run(
            "app", "register", cli.executable, "--application-identifier", "security", "--access-group", "security",
            "--access-group", "TEAM.shared")
        XCTAssertEqual(both.status, 0, both.stderr)
        XCTAssertFalse(both.stderr.contains(note), "the group is granted: nothing to say")
        // The command is always a general-purpose tool: that it says.
        XCTAssertTrue(both.stderr.contains("is registered as a general-purpose tool"), both.stderr)
        let byIdentifier = try cli.run("app", "register", cli.executable, "--application-identifier", "security")
        XCTAssertFalse(byIdentifier.stderr.contains(note), "without groups the identifier, security, is the group")

        // Another executable is not the command: its groups are its own business.
        let helper = URL(fileURLWithPath: cli.executable).deletingLastPathComponent()
            .appendingPathComponent("keychain-test-helper").path
        let other = try cli.run(
            "app", "register", helper, "--application-identifier", "helper", "--access-group", "TEAM.shared")
        XCTAssertEqual(other.status, 0, other.stderr)
        XCTAssertEqual(other.stderr, "")
    }

    private static let unlockPrompt = "password to unlock default: "
    private static let wrongPasscode =
        "security: SecKeychainUnlock: The user name or passphrase you entered is not correct."

    private func failedAttempts() throws -> String? {
        try cli.run("show-keychain-info").stdout.split(separator: "\n").first { $0.contains("failed attempts:") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
    }

    private func occurrences(of text: String, in screen: String) -> Int {
        screen.components(separatedBy: text).count - 1
    }

    /// Enter alone at the terminal's passcode prompt was sent to the keychain as a passcode, and counted
    /// as a wrong one. It is asked again now, and nothing is counted.
    func testEnterAloneAtThePasscodePromptIsAskedAgain() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "a", "-s", "locked", "-w", "class-a").status, 0)
        XCTAssertEqual(try cli.run("set-keychain-password", "-p", "1234").status, 0)

        let (found, screen) = try cli.runOnTerminal(
            ["find-generic-password", "-s", "locked", "-w"],
            answers: [(Self.unlockPrompt, ""), (Self.unlockPrompt, "1234")])
        XCTAssertEqual(found.status, 0, screen)
        XCTAssertEqual(found.stdout, "class-a\n")
        XCTAssertEqual(occurrences(of: Self.unlockPrompt, in: screen), 2, screen)
        XCTAssertFalse(screen.contains(Self.wrongPasscode), screen)
        XCTAssertEqual(try failedAttempts(), "failed attempts: 0")

        let (unlocked, unlockScreen) = try cli.runOnTerminal(
            ["unlock-keychain"], answers: [(Self.unlockPrompt, ""), (Self.unlockPrompt, "1234")])
        XCTAssertEqual(unlocked.status, 0, unlockScreen)
        XCTAssertEqual(occurrences(of: Self.unlockPrompt, in: unlockScreen), 2, unlockScreen)
        XCTAssertEqual(try failedAttempts(), "failed attempts: 0")

        // The current passcode of set-keychain-password: Enter alone asked again, a wrong one too, the new
        // passcode kept from the first time it was typed.
        let (changed, changeScreen) = try cli.runOnTerminal(
            ["set-keychain-password"],
            answers: [
                ("Old Password: ", ""), ("Old Password: ", "9999"), ("New Password: ", "5678"),
                ("Retype New Password: ", "5678"), ("Old Password: ", "1234"),
            ])
        XCTAssertEqual(changed.status, 0, changeScreen)
        XCTAssertEqual(occurrences(of: "Old Password: ", in: changeScreen), 3, changeScreen)
        XCTAssertEqual(
            occurrences(of: "New Password: ", in: changeScreen), 2, "asked and retyped once: \(changeScreen)")
        XCTAssertTrue(
            changeScreen.contains(
                "security: SecKeychainChangePassword: The user name or passphrase you entered is not correct."),
            changeScreen)
        XCTAssertEqual(try failedAttempts(), "failed attempts: 0", "a right passcode clears the count")
        XCTAssertEqual(try cli.run("unlock-keychain", "-p", "5678").status, 0, "the new passcode is set")
    }

    /// Wrong passcodes at the terminal's prompt: three, as sudo allows, then the command ends with the
    /// failure a wrong passcode on standard input gives (51), having asked exactly three times.
    func testThreeWrongPasscodesAtTheTerminalEndTheCommand() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "a", "-s", "locked", "-w", "class-a").status, 0)
        XCTAssertEqual(try cli.run("set-keychain-password", "-p", "1234").status, 0)
        let wrong = Array(repeating: (Self.unlockPrompt, "0000"), count: 3)

        let (found, screen) = try cli.runOnTerminal(["find-generic-password", "-s", "locked", "-w"], answers: wrong)
        XCTAssertEqual(found.status, 51, screen)
        XCTAssertEqual(found.stdout, "")
        XCTAssertEqual(occurrences(of: Self.unlockPrompt, in: screen), 3, screen)
        XCTAssertEqual(occurrences(of: Self.wrongPasscode, in: screen), 3, "each wrong one is reported: \(screen)")
        XCTAssertFalse(screen.contains("0000"), "passcodes are not echoed")
        XCTAssertEqual(try failedAttempts(), "failed attempts: 3")

        let piped = try cli.run(["unlock-keychain"], input: "0000\n")
        XCTAssertEqual(piped.status, 51)
        XCTAssertTrue(piped.stderr.hasPrefix(Self.wrongPasscode), "the same wording: \(piped.stderr)")

        let other = CommandRunner()
        XCTAssertEqual(try other.run("set-keychain-password", "-p", "1234").status, 0)
        let (unlock, unlockScreen) = try other.runOnTerminal(["unlock-keychain"], answers: wrong)
        XCTAssertEqual(unlock.status, 51, unlockScreen)
        XCTAssertEqual(occurrences(of: Self.unlockPrompt, in: unlockScreen), 3, unlockScreen)
        XCTAssertEqual(occurrences(of: Self.wrongPasscode, in: unlockScreen), 3, unlockScreen)
    }

    /// Every status the Security module defines, by name, read from its source.
    private static func definedStatusCodes() throws -> [(name: String, status: OSStatus)] {
        let source = try String(
            contentsOfFile: SecurityCommandTests.packageRoot
                + "/Sources/Facade/KeychainStatus/SecStatusCodes.swift",
            encoding: .utf8)
        let pattern = try NSRegularExpression(pattern: #"public let (\w+): OSStatus = (-?\d+)"#)
        let text = source as NSString
        return pattern.matches(in: source, range: NSRange(location: 0, length: text.length)).compactMap { match in
            OSStatus(text.substring(with: match.range(at: 2))).map { (text.substring(with: match.range(at: 1)), $0) }
        }
    }

    /// `security error -25294` printed only "OSStatus -25294": every code the module defines has Apple's
    /// message now, in SecCopyErrorMessageString and so in the command.
    func testEveryDefinedStatusHasAMessage() throws {
        let codes = try Self.definedStatusCodes()
        XCTAssertGreaterThan(codes.count, 400, "the codes were read")
        for (name, status) in codes {
            let message = SecCopyErrorMessageString(status, nil) as String?
            XCTAssertNotEqual(message, "OSStatus \(status)", "\(name) (\(status)) has no message")
            XCTAssertFalse(message?.isEmpty ?? true, name)
        }
        let shown = try cli.run(["error"] + codes.map { String($0.status) })
        XCTAssertEqual(shown.status, 0, shown.stderr)
        let lines = shown.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, codes.count)
        for line in lines { XCTAssertFalse(line.contains(" OSStatus "), String(line)) }
        XCTAssertEqual(
            try cli.run("error", "-25294").stdout,
            "Error: 0xFFFF9D32 -25294 The specified keychain could not be found.\n")
    }

    func testVersion() throws {
        let version = try cli.run("--version")
        XCTAssertEqual(version.status, 0, version.stderr)
        XCTAssertEqual(version.stdout, "security (swift-keychain) \(ProjectVersion.string)\n")
        XCTAssertEqual(version.stderr, "")
        XCTAssertFalse(ProjectVersion.string.isEmpty)
        XCTAssertEqual(try cli.run("--version", "extra").status, 2)
    }

    /// The usage said -a was required, but (as on macOS) an item without one is stored, with an empty
    /// account: the usage says it is optional now.
    func testAddWithoutAnAccountAndItsUsage() throws {
        let added = try cli.run("add-generic-password", "-s", "foo", "-w", "x")
        XCTAssertEqual(added.status, 0, added.stderr)
        let found = try cli.run("find-generic-password", "-s", "foo", "--json")
        let object = try JSONSerialization.jsonObject(with: Data(found.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(object?["acct"] as? String, "", "stored with an empty account")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "foo", "-w").stdout, "x\n")

        let usage = try cli.run("help", "add-generic-password").stdout
        XCTAssertTrue(usage.hasPrefix("Usage: add-generic-password [-a account] "), usage)
        let accountLine = usage.split(separator: "\n").first {
            $0.trimmingCharacters(in: .whitespaces).hasPrefix("-a ")
        }
        XCTAssertEqual(
            accountLine.map { $0.trimmingCharacters(in: .whitespaces) },
            "-a  Specify account name (optional; if omitted, the account is empty)")
    }

    /// The README says the keychain's database names it after the options, but its file name alone
    /// (`keychain.db`) exited 50: the file name and the full path are both accepted now.
    func testTheDatabaseFileNameNamesTheKeychain() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-s", "X", "-a", "a", "-w", "pw", "keychain.db").status, 0)
        let byName = try cli.run("find-generic-password", "-s", "X", "-w", "keychain.db")
        XCTAssertEqual(byName.status, 0, byName.stderr)
        XCTAssertEqual(byName.stdout, "pw\n")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "X", "-w", cli.home + "/keychain.db").stdout, "pw\n")
        XCTAssertEqual(try cli.run("dump-keychain", "keychain.db").status, 0)
        let other = try cli.run("find-generic-password", "-s", "X", "other.db")
        XCTAssertEqual(other.status, 50, "another name is still no keychain of this store")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "X", "sub/keychain.db").status, 50)

        let readme = try String(contentsOfFile: SecurityCommandTests.packageRoot + "/README.md", encoding: .utf8)
        XCTAssertTrue(
            readme.replacingOccurrences(of: "\n  ", with: " ").contains(
                "(its file name `keychain.db` or its full path)"),
            "the README says so")
    }

    /// show-keychain-info did not say what it talks to.
    func testShowKeychainInfoSaysWhatServesIt() throws {
        let embedded = try cli.run("show-keychain-info")
        XCTAssertEqual(embedded.status, 0, embedded.stderr)
        XCTAssertTrue(
            embedded.stdout.contains("\n    served by: the embedded keychain (no daemon), in \(cli.home)\n"),
            embedded.stdout)

        let daemon = try TestDaemon()
        cli.extraEnvironment["KEYCHAIN_SOCKET"] = daemon.socket
        let served = try cli.run("show-keychain-info")
        XCTAssertEqual(served.status, 0, served.stderr)
        XCTAssertTrue(
            served.stdout.contains("\n    served by: the keychain daemon at \(daemon.socket)\n"), served.stdout)
        XCTAssertFalse(served.stdout.contains("embedded"), served.stdout)
    }

    /// `companion` failures were labelled SecKeychainBiometry.
    func testCompanionFailuresHaveTheirOwnLabel() throws {
        let companion = try cli.run("companion", "pair")
        XCTAssertNotEqual(companion.status, 0, "no companion is simulated here")
        XCTAssertTrue(companion.stderr.hasPrefix("security: SecKeychainCompanion: "), companion.stderr)
        XCTAssertFalse(companion.stderr.contains("SecKeychainBiometry"), companion.stderr)
    }

    /// The README's verb list left out biometry and companion: every verb `security help` lists is in it.
    func testTheReadmeListsEveryVerb() throws {
        let readme = try String(contentsOfFile: SecurityCommandTests.packageRoot + "/README.md", encoding: .utf8)
        let list = try XCTUnwrap(
            readme.components(separatedBy: "\n- Verbs: ").dropFirst().first?.components(separatedBy: "\n- ").first)
        let help = try cli.run("help").stdout
        let verbs = help.split(separator: "\n").drop { $0 != "Commands:" }.dropFirst().compactMap {
            $0.split(separator: " ").first.map(String.init)
        }
        XCTAssertGreaterThan(verbs.count, 10, help)
        for verb in verbs {
            // The password verbs are listed as `add-`, `find-`, `delete-generic-password`.
            let parts = verb.split(separator: "-", maxSplits: 1).map(String.init)
            let listedTogether =
                parts.count == 2 && parts[1].hasSuffix("-password") && list.contains("`\(parts[0])-`")
                && list.contains("-\(parts[1])`")
            XCTAssertTrue(list.contains("`\(verb)") || listedTogether, "\(verb) is not in the README's verb list")
        }
        XCTAssertTrue(list.contains("`--version`"), list)
    }

    /// `list-items`: one line an item, without secrets, and the same as JSON.
    func testListItems() throws {
        let empty = try cli.run("list-items")
        XCTAssertEqual(empty.status, 0, empty.stderr)
        XCTAssertEqual(empty.stdout, "")
        XCTAssertEqual(try cli.run("list-items", "--json").stdout.filter { !$0.isWhitespace }, "[]")

        cli.accessGroups = "TEAM.cli,TEAM.shared"
        XCTAssertEqual(
            try cli.run("add-generic-password", "-a", "alice", "-s", "web", "-l", "Web login", "-w", "secret-one")
                .status, 0)
        XCTAssertEqual(
            try cli.run(
                "add-internet-password", "-a", "bob", "-s", "example.com", "-g", "TEAM.shared", "-w", "secret-two"
            )
            .status, 0)
        XCTAssertEqual(try cli.run("add-generic-password", "-s", "esc\u{1B}[2J", "-w", "secret-three").status, 0)

        let listed = try cli.run("list-items")
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let lines = listed.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 3, listed.stdout)
        XCTAssertTrue(
            lines.contains("class=genp service=\"web\" account=\"alice\" label=\"Web login\" group=\"TEAM.cli\""),
            listed.stdout)
        XCTAssertTrue(
            lines.contains(
                "class=inet service=\"example.com\" account=\"bob\" label=\"example.com\" group=\"TEAM.shared\""),
            listed.stdout)
        XCTAssertFalse(listed.stdout.contains("secret"), "no secrets")
        XCTAssertFalse(listed.stdout.contains("\u{1B}"), "an escape in an attribute is not written raw")

        let json = try cli.run("list-items", "--json")
        XCTAssertEqual(json.status, 0, json.stderr)
        let array = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(array.count, 3)
        let web = try XCTUnwrap(array.first { $0["svce"] as? String == "web" })
        XCTAssertEqual(web["class"] as? String, "genp")
        XCTAssertEqual(web["acct"] as? String, "alice")
        XCTAssertEqual(web["labl"] as? String, "Web login")
        XCTAssertEqual(web["agrp"] as? String, "TEAM.cli")
        XCTAssertEqual(Set(web.keys), ["class", "svce", "acct", "labl", "agrp"], "these attributes only")
        XCTAssertFalse(json.stdout.contains("secret"))
        XCTAssertEqual(try cli.run("list-items", "other.keychain").status, 50)
    }

    /// Binds a Unix socket at `path` and closes it without listening: the file stays, nothing answers.
    static func leaveSocketWithoutListener(at path: String) throws {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw NSError(domain: "socket", code: Int(errno)) }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw NSError(domain: "socket path too long", code: bytes.count)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw NSError(domain: "bind", code: Int(errno)) }
    }
}
