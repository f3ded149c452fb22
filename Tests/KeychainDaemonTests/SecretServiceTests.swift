import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The Secret Service as deployed: `securityd --secret-service` as the user (nobody, when the tests
/// run as root), on a private session bus of that user, used by unmodified clients run as that user.
class SecretServiceTestCase: XCTestCase {
    var bus: TestBus!
    var daemon: TestDaemon!
    var programs: ClientPrograms!
    var home = ""
    let user: uid_t? = canSwitchUsers ? 65534 : nil

    override func setUpWithError() throws {
        for tool in ["/usr/bin/secret-tool", "/usr/bin/python3"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("needs \(tool) (libsecret-tools, python3-secretstorage, python3-keyring)")
        }
        bus = try TestBus(user: user)
        programs = try ClientPrograms()
        home = programs.directory + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        if let user { chown(home, user, user) }
        try startDaemon()
    }

    override func tearDown() {
        daemon = nil
        bus = nil
        programs = nil
    }

    func startDaemon(_ extra: [String] = []) throws {
        daemon = try TestDaemon(
            arguments: ["--secret-service"] + extra, environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address],
            user: user)
        try waitForName()
    }

    /// Waits until the daemon owns the name on the bus.
    func waitForName(timeout: TimeInterval = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if daemon.log.contains("serving org.freedesktop.secrets") { return }
            usleep(20_000)
        }
        XCTFail("the daemon did not take the name: \(daemon.log)")
    }

    /// Runs `program` as the daemon's user, on the test bus.
    @discardableResult
    func run(_ program: String, _ arguments: [String], input: String? = nil) throws -> (status: Int32, output: String) {
        try ClientPrograms.run(
            program, arguments, daemon: daemon,
            environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address, "HOME": home, "PYTHONDONTWRITEBYTECODE": "1"],
            input: input, user: user)
    }

    func secretTool(_ arguments: String..., input: String? = nil, as tool: String = "/usr/bin/secret-tool") throws -> (
        status: Int32, output: String
    ) {
        try run(tool, arguments, input: input)
    }

    func python(_ code: String) throws -> (status: Int32, output: String) {
        try run("/usr/bin/python3", ["-c", code])
    }

    func security(_ arguments: String...) throws -> (status: Int32, output: String) {
        try run(ClientPrograms.built("security"), arguments)
    }

    func allowUnregisteredPrograms() throws {
        XCTAssertEqual(try security("app", "policy", "secret-service", "allow").status, 0)
    }

}

/// Unmodified clients (secret-tool, Python's SecretStorage and keyring, SecretStorage's own test
/// suite), isolation between apps, the policy, and the keychain behind the bus.
final class SecretServiceTests: SecretServiceTestCase {
    // MARK: Real clients

    func testSecretToolStoresLooksUpSearchesAndClears() throws {
        try allowUnregisteredPrograms()
        XCTAssertEqual(
            try secretTool("store", "--label=Mail", "service", "mail", "user", "ann", input: "pa$$ word\n").status, 0)
        XCTAssertEqual(
            try secretTool("store", "--label=Chat", "service", "chat", "user", "ann", input: "other").status, 0)
        XCTAssertEqual(
            try secretTool("lookup", "service", "mail", "user", "ann").output,
            "pa$$ word\n".trimmingCharacters(in: .whitespacesAndNewlines))
        let found = try secretTool("search", "--all", "user", "ann").output
        XCTAssertTrue(found.contains("label = Mail") && found.contains("label = Chat"), found)
        XCTAssertTrue(found.contains("attribute.service = mail"), found)
        // Storing the same attributes again replaces the secret (secret-tool asks for replace).
        XCTAssertEqual(
            try secretTool("store", "--label=Mail", "service", "mail", "user", "ann", input: "new").status, 0)
        XCTAssertEqual(try secretTool("lookup", "service", "mail", "user", "ann").output, "new")
        XCTAssertEqual(
            try secretTool("search", "--all", "service", "mail").output.components(separatedBy: "label = ").count, 2)
        XCTAssertEqual(try secretTool("clear", "service", "mail").status, 0)
        XCTAssertEqual(try secretTool("lookup", "service", "mail", "user", "ann").status, 1)
        XCTAssertEqual(try secretTool("lookup", "service", "chat").output, "other")
    }

    func testPythonSecretStorageAndKeyringRoundTrips() throws {
        try allowUnregisteredPrograms()
        let storage = try python(
            """
            import secretstorage
            connection = secretstorage.dbus_init()
            collection = secretstorage.get_default_collection(connection)
            item = collection.create_item('Token', {'application': 'demo', 'kind': 'token'}, b'\\x00binary\\xff')
            found = list(collection.search_items({'kind': 'token'}))
            print(len(found), found[0].get_secret() == b'\\x00binary\\xff', found[0].get_label())
            print(collection.get_label(), collection.is_locked())
            """)
        XCTAssertEqual(storage.output, "1 True Token\nLogin False", storage.output)
        let keyring = try python(
            """
            import keyring
            from keyring.backends import SecretService
            keyring.set_keyring(SecretService.Keyring())
            keyring.set_password('system', 'ann', 's3cret')
            print(keyring.get_password('system', 'ann'))
            keyring.delete_password('system', 'ann')
            print(keyring.get_password('system', 'ann'))
            """)
        XCTAssertEqual(keyring.output, "s3cret\nNone", keyring.output)
    }

    /// SecretStorage's own test suite (3.3.3, from PyPI, checked by its SHA-256), run against the
    /// service with the DH exchange and then with plain sessions only.
    func testSecretStoragesOwnSuitePassesWithBothAlgorithms() throws {
        try allowUnregisteredPrograms()
        let suite = try SecretStorageSuite.prepare(in: programs.directory)
        for (name, wrapper) in [
            ("dh", ""),
            // Offered an algorithm the service does not know, SecretStorage falls back to plain.
            ("plain", "import secretstorage.util; secretstorage.util.ALGORITHM_DH = 'unknown-for-the-test'; "),
        ] {
            let result = try run(
                "/usr/bin/python3",
                [
                    "-c",
                    "import sys, runpy; sys.path.insert(0, '\(suite)'); sys.argv = ['run_tests.py']; \(wrapper)runpy.run_path('\(suite)/tests/run_tests.py', run_name='__main__')",
                ])
            XCTAssertEqual(result.status, 0, "\(name): \(result.output)")
            XCTAssertTrue(result.output.contains("Ran 26 tests"), "\(name): \(result.output)")
            XCTAssertTrue(result.output.hasSuffix("OK (skipped=6)"), "\(name): \(result.output)")
        }
    }

    // MARK: Isolation and policy

    func testTwoRegisteredAppsCannotSeeEachOthersItems() throws {
        let one = try programs.copy("/usr/bin/secret-tool", as: "one/secret-tool")
        let two = try programs.copy("/usr/bin/secret-tool", as: "two/secret-tool")
        XCTAssertEqual(try security("app", "register", one, "--application-identifier", "T.one").status, 0)
        XCTAssertEqual(try security("app", "register", two, "--application-identifier", "T.two").status, 0)
        XCTAssertEqual(try secretTool("store", "--label=One", "service", "web", input: "one's", as: one).status, 0)
        XCTAssertEqual(try secretTool("lookup", "service", "web", as: one).output, "one's")
        XCTAssertEqual(try secretTool("lookup", "service", "web", as: two).status, 1)
        XCTAssertEqual(try secretTool("search", "--all", "service", "web", as: two).output, "")
        // Two's clear finds nothing to clear.
        _ = try secretTool("clear", "service", "web", as: two)
        XCTAssertEqual(try secretTool("store", "--label=Two", "service", "web", input: "two's", as: two).status, 0)
        XCTAssertEqual(try secretTool("lookup", "service", "web", as: one).output, "one's")
        XCTAssertEqual(try secretTool("lookup", "service", "web", as: two).output, "two's")
        // An unregistered program meets the policy: ask, and no prompt program here, so a refusal.
        let refused = try secretTool("lookup", "service", "web")
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.output.contains("Secret Service"), refused.output)
    }

    func testDenyRefusesUnregisteredProgramsAndAllowSharesOneGroup() throws {
        XCTAssertEqual(try security("app", "policy", "secret-service", "deny").status, 0)
        let denied = try secretTool("store", "--label=x", "k", "v", input: "x")
        XCTAssertNotEqual(denied.status, 0)
        XCTAssertTrue(denied.output.contains("policy is deny"), denied.output)
        try allowUnregisteredPrograms()
        XCTAssertEqual(try secretTool("store", "--label=x", "k", "v", input: "shared").status, 0)
        XCTAssertEqual(
            try python(
                "import secretstorage; c = secretstorage.dbus_init(); print(next(secretstorage.search_items(c, {'k': 'v'})).get_secret().decode())"
            ).output, "shared")
        XCTAssertEqual(try security("app", "policy", "secret-service", "sometimes").status, 2)
    }

    // MARK: The keychain behind it

    func testAnItemStoredOverTheBusIsReadBySecItemAndTheOtherWay() throws {
        let tool = try programs.copy("/usr/bin/secret-tool", as: "tool/secret-tool")
        let app = try programs.app("app")
        XCTAssertEqual(
            try security("app", "register", tool, "--application-identifier", "T.tool", "--access-group", "T.shared")
                .status, 0)
        XCTAssertEqual(
            try security("app", "register", app, "--application-identifier", "T.app", "--access-group", "T.shared")
                .status, 0)
        XCTAssertEqual(
            try secretTool("store", "--label=Web", "service", "web", "account", "ann", input: "from-the-bus", as: tool)
                .status, 0)
        XCTAssertEqual(try run(app, ["read", "web", "ann"]).output, "from-the-bus")
        XCTAssertEqual(try run(app, ["put", "mail", "bob", "from-secitem"]).output, "status 0")
        XCTAssertEqual(try secretTool("lookup", "service", "mail", "account", "bob", as: tool).output, "from-secitem")
    }

    /// No graphical session (a user on SSH): Debian's terminal pinentry, told the client's terminal,
    /// asks there, and what is typed on that terminal unlocks the keychain.
    func testWithNoGraphicalSessionTheUnlockPromptAsksOnTheClientsTerminal() throws {
        let curses = "/usr/bin/pinentry-curses"
        guard FileManager.default.isExecutableFile(atPath: curses),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/script")
        else { throw XCTSkip("needs pinentry-curses and script (bsdutils)") }
        daemon = nil
        try startDaemon(["--pinentry", curses])
        try allowUnregisteredPrograms()
        XCTAssertEqual(try security("set-keychain-password", "-p", "1470").status, 0)
        XCTAssertEqual(try secretTool("store", "--label=x", "k", "v", input: "behind-the-lock").status, 0)
        XCTAssertEqual(try security("lock-keychain").status, 0)
        let script = programs.directory + "/unlock.py"
        try """
        import secretstorage
        c = secretstorage.get_default_collection(secretstorage.dbus_init())
        print('result', c.unlock(), c.is_locked(), next(c.search_items({'k': 'v'})).get_secret().decode())
        """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o644)
        // The keys typed on the client's terminal (script's input) once the prompt has had time to show.
        let session = try run(
            "/bin/sh",
            [
                "-c",
                "(for attempt in 1 2 3 4 5 6 7 8; do sleep 1.5; printf '1470\\r'; done) | /usr/bin/script -qec '/usr/bin/python3 \(script)' /dev/null",
            ])
        XCTAssertTrue(session.output.contains("result False False behind-the-lock"), session.output)
        XCTAssertTrue(try security("show-keychain-info").output.contains("unlocked"))
    }

    func testLockingTheKeychainLocksTheCollectionsAndUnlockPromptsThroughPinentry() throws {
        let pinentry = try FakePinentry(.passcode("2468"))
        // The prompt program runs as the daemon's user: it must be able to write its transcript.
        _ = FileManager.default.createFile(atPath: pinentry.transcriptPath, contents: nil)
        if let user { chown(pinentry.transcriptPath, user, user) }
        daemon = nil
        try startDaemon(["--pinentry", pinentry.path])
        try allowUnregisteredPrograms()
        XCTAssertEqual(try security("set-keychain-password", "-p", "2468").status, 0)
        XCTAssertEqual(try secretTool("store", "--label=x", "k", "v", input: "kept").status, 0)
        XCTAssertEqual(try security("lock-keychain").status, 0)
        let locked = try python(
            """
            import secretstorage
            c = secretstorage.get_default_collection(secretstorage.dbus_init())
            print(c.is_locked())
            try:
                list(c.search_items({'k': 'v'}))
            except Exception as error:
                print(type(error).__name__)
            """)
        XCTAssertEqual(locked.output, "True\nDBusErrorResponse", locked.output)
        // Unlock returns a prompt; the prompt asks for the passcode through pinentry and unlocks.
        // The client runs on a terminal (as over SSH, with no graphical session): the prompt program is
        // told that terminal, so that a terminal pinentry asks there.
        let script = programs.directory + "/unlock.py"
        try """
        import secretstorage
        c = secretstorage.get_default_collection(secretstorage.dbus_init())
        print(c.unlock(), c.is_locked(), next(c.search_items({'k': 'v'})).get_secret().decode())
        """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o644)
        let unlocked = try run("/usr/bin/script", ["-qec", "/usr/bin/python3 " + script, "/dev/null"])
        XCTAssertEqual(unlocked.output, "False False kept", unlocked.output)
        XCTAssertTrue(pinentry.transcript.contains("GETPIN"), pinentry.transcript)
        XCTAssertTrue(pinentry.transcript.contains("OPTION ttyname=/dev/pts/"), pinentry.transcript)
        // secret-tool's lock (which takes the collection's id) locks the keychain, for the socket's
        // clients too. libsecret-tools 0.20.5 then crashes on its way out, against gnome-keyring as
        // well, so only what it did is checked.
        _ = try secretTool("lock", "--collection=login")
        XCTAssertTrue(try security("show-keychain-info").output.contains("locked"))
        XCTAssertFalse(try security("show-keychain-info").output.contains("unlocked"))
        XCTAssertEqual(try secretTool("lookup", "k", "v").status, 1)
    }
}

/// SecretStorage's source distribution, fetched once from PyPI into the build directory and checked
/// against its published SHA-256 before it is used.
enum SecretStorageSuite {
    static let version = "3.3.3"
    static let sha256 = "2403533ef369eca6d2ba81718576c5e0f564d5cca1b58f73a8b23e7d4eeebd77"

    /// The unpacked distribution, copied into `directory` (readable by the test user).
    static func prepare(in directory: String) throws -> String {
        let cache = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/test-downloads").path
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        let archive = cache + "/SecretStorage-\(version).tar.gz"
        // pip of the python3 on PATH, else Debian's (python3-pip).
        var attempts: [String] = []
        for python in ["/usr/bin/env", "/usr/bin/python3"] where !FileManager.default.fileExists(atPath: archive) {
            let fetch = Process()
            fetch.executableURL = URL(fileURLWithPath: python)
            fetch.arguments =
                (python == "/usr/bin/env" ? ["python3"] : []) + [
                    "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "--dest", cache,
                    "secretstorage==\(version)",
                ]
            let result = try ChildProcess.run(fetch, input: nil, errorsToOutput: true)
            attempts.append(String(decoding: result.stdout, as: UTF8.self))
        }
        guard FileManager.default.fileExists(atPath: archive) else {
            throw TestDaemon.Failure(
                description: "cannot fetch SecretStorage \(version) from PyPI: \(attempts.joined(separator: "\n"))")
        }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: archive))
        guard Hex.encode(try Digest.sha256(bytes)) == sha256 else {
            try? FileManager.default.removeItem(atPath: archive)
            throw TestDaemon.Failure(description: "\(archive) is not SecretStorage \(version) as published")
        }
        let unpack = Process()
        unpack.executableURL = URL(fileURLWithPath: "/bin/tar")
        unpack.arguments = ["-xzf", archive, "-C", directory]
        let result = try ChildProcess.run(unpack, input: nil, errorsToOutput: true)
        guard result.status == 0 else { throw TestDaemon.Failure(description: "cannot unpack \(archive)") }
        let unpacked = directory + "/SecretStorage-\(version)"
        let readable = Process()
        readable.executableURL = URL(fileURLWithPath: "/bin/chmod")
        readable.arguments = ["-R", "a+rX", unpacked]
        _ = try ChildProcess.run(readable, input: nil, errorsToOutput: true)
        return unpacked
    }
}

/// Bad input, prompts across connections, and the name, each answered by the documented D-Bus error
/// while the service goes on serving everyone else.
final class SecretServiceBadInputTests: SecretServiceTestCase {
    func testBadInputGetsTheDocumentedErrorAndWritesNothing() throws {
        try allowUnregisteredPrograms()
        let script = programs.directory + "/bad-input.py"
        try SecretServiceScripts.badInput.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o644)
        let result = try run("/usr/bin/python3", [script])
        XCTAssertEqual(result.status, 0, result.output)
        let invalid = "org.freedesktop.DBus.Error.InvalidArgs"
        let expected: [String: String] = [
            "wrong signature": invalid, "unknown method": "org.freedesktop.DBus.Error.UnknownMethod",
            "unknown collection": "org.freedesktop.Secret.Error.NoSuchObject",
            "unknown item": "org.freedesktop.Secret.Error.NoSuchObject",
            "item path that is no reference": "org.freedesktop.Secret.Error.NoSuchObject",
            "unknown algorithm": "org.freedesktop.DBus.Error.NotSupported",
            "DH key 0": invalid, "DH key 1": invalid, "DH key p-1": invalid, "DH key p": invalid,
            "DH key of 129 bytes": invalid, "DH key as a string": invalid, "DH session": "ok",
            "IV of 15 bytes": invalid, "ciphertext not whole blocks": invalid, "bad padding": invalid,
            "secret in a session of another connection": "org.freedesktop.Secret.Error.NoSession",
            "no such session": "org.freedesktop.Secret.Error.NoSession",
            "300 attributes": invalid, "attribute of 5000 bytes": invalid, "secret over 1 MiB": invalid,
            "search with 300 attributes": invalid, "items written by bad input": "0",
            "GetSecrets of 1001 objects": invalid, "SetAlias of default": "org.freedesktop.DBus.Error.AccessDenied",
            "a descriptor to OpenSession": invalid,
            "2000 sessions opened and closed": "ok",
            // One session (the DH one) is open already: 64 in all.
            "sessions left open before refusal": "63 then org.freedesktop.DBus.Error.LimitsExceeded",
            "closing another connection's session": "org.freedesktop.Secret.Error.NoSuchObject",
            "another client afterwards": "ok",
        ]
        let lines = Dictionary(
            result.output.split(separator: "\n").compactMap { line -> (String, String)? in
                guard let colon = line.range(of: ": ") else { return nil }
                return (String(line[..<colon.lowerBound]), String(line[colon.upperBound...]))
            }, uniquingKeysWith: { $1 })
        for (check, outcome) in expected { XCTAssertEqual(lines[check], outcome, check) }
        XCTAssertFalse(daemon.log.contains("fatal"), daemon.log)
    }

    func testAPromptBelongsToItsConnectionAndOneThatLeavesMidPromptHoldsUpNoOne() throws {
        // A prompt program that takes two seconds to answer.
        let pinentry = programs.directory + "/slow-pinentry"
        try """
        #!/bin/sh
        echo "OK Pleased to meet you"
        while IFS= read -r line; do
          case "$line" in
            GETPIN) sleep 2; printf 'D 1357\\nOK\\n' ;;
            BYE) echo "OK closing connection"; exit 0 ;;
            *) echo OK ;;
          esac
        done
        """.write(toFile: pinentry, atomically: true, encoding: .utf8)
        chmod(pinentry, 0o755)
        daemon = nil
        try startDaemon(["--pinentry", pinentry])
        try allowUnregisteredPrograms()
        XCTAssertEqual(try security("set-keychain-password", "-p", "1357").status, 0)
        XCTAssertEqual(try security("lock-keychain").status, 0)
        let script = programs.directory + "/prompts.py"
        try SecretServiceScripts.prompts.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o644)
        let result = try run("/usr/bin/python3", [script])
        XCTAssertEqual(
            result.output,
            """
            unlock: ok 0 True
            prompt of another connection: org.freedesktop.Secret.Error.NoSuchObject
            prompt: ok
            another client while the prompt runs: org.freedesktop.Secret.Error.IsLocked in under a second: True
            """)
        // The passcode the user typed still unlocks, though the client left.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !(try security("show-keychain-info").output.contains("unlocked")) { usleep(100_000) }
        XCTAssertTrue(try security("show-keychain-info").output.contains("unlocked"))
    }

    func testTheNameIsTakenOnlyWhenFreeOrWithReplace() throws {
        let second = try TestDaemon(
            arguments: ["--secret-service"], environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address], user: user)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !second.log.contains("is not served") { usleep(20_000) }
        XCTAssertTrue(second.log.contains("org.freedesktop.secrets is held by"), second.log)
        // It still serves its keychain's socket.
        XCTAssertEqual(
            try ClientPrograms.run(
                ClientPrograms.built("security"), ["show-keychain-info"], daemon: second, user: user
            ).status, 0)
        let third = try TestDaemon(
            arguments: ["--secret-service", "--replace"], environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address],
            user: user)
        while Date() < deadline, !third.log.contains("serving org.freedesktop.secrets") { usleep(20_000) }
        XCTAssertTrue(third.log.contains("serving org.freedesktop.secrets"), third.log)
        while Date() < deadline, !daemon.log.contains("took org.freedesktop.secrets over") { usleep(20_000) }
        XCTAssertTrue(daemon.log.contains("another program took org.freedesktop.secrets over"), daemon.log)
    }
}

/// The `ask` policy: the user is asked once per executable, through the prompt program, and the
/// answer outlives the daemon.
final class SecretServiceAskPolicyTests: SecretServiceTestCase {
    func testAnAnswerIsAskedOncePerExecutableAndKeptAcrossARestart() throws {
        let pinentry = try FakePinentry(.passcode("8642"))
        _ = FileManager.default.createFile(atPath: pinentry.transcriptPath, contents: nil)
        if let user { chown(pinentry.transcriptPath, user, user) }
        daemon = nil
        try startDaemon(["--pinentry", pinentry.path])
        XCTAssertEqual(try security("set-keychain-password", "-p", "8642").status, 0)
        // secret-tool is asked about: the user answers with the passcode, and it may.
        XCTAssertEqual(try secretTool("store", "--label=x", "app", "one", input: "first").status, 0)
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 1)
        XCTAssertEqual(try secretTool("lookup", "app", "one").output, "first")
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 1, "asked once")
        // Another executable is asked about on its own; this one the user cancels, and that is kept too.
        try pinentry.set(.cancel)
        let copy = try programs.copy("/usr/bin/secret-tool", as: "other/secret-tool")
        XCTAssertNotEqual(try secretTool("lookup", "app", "one", as: copy).status, 0)
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 2)
        // The refusal holds until the daemon restarts: asking again is not asked again.
        let refused = try secretTool("lookup", "app", "one", as: copy)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.output.contains("refused"), refused.output)
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 2)
        // After a restart (the keychain locked, so unlocked again first), the yes holds without asking;
        // the no is not kept (a cancel cannot be told from a prompt no one saw), so that one is asked again.
        daemon.stop()
        try daemon.start()
        try waitForName()
        XCTAssertEqual(try security("unlock-keychain", "-p", "8642").status, 0)
        XCTAssertEqual(try secretTool("lookup", "app", "one").output, "first")
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 2, "the yes holds")
        XCTAssertNotEqual(try secretTool("lookup", "app", "one", as: copy).status, 0)
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 3, "the no was not kept")
        // A file edited by hand (without the device root) fails its check: every unregistered program is
        // refused, none allowed.
        let state = daemon.home + "/secret-service.state"
        var text = try String(contentsOfFile: state, encoding: .utf8)
        text = text.replacingOccurrences(of: "secret-tool", with: "secret-tooL")
        try text.write(toFile: state, atomically: false, encoding: .utf8)
        daemon.stop()
        try daemon.start()
        try waitForName()
        XCTAssertEqual(try security("unlock-keychain", "-p", "8642").status, 0)
        XCTAssertNotEqual(try secretTool("lookup", "app", "one", as: copy).status, 0)
        XCTAssertNotEqual(try secretTool("lookup", "app", "one").status, 0)
    }
}

/// The D-Bus service file: a bus that has it starts the daemon when a program first asks for the name.
final class SecretServiceActivationTests: XCTestCase {
    func testTheBusStartsTheDaemonWhenAProgramFirstAsksForTheSecretService() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/secret-tool") else {
            throw XCTSkip("needs secret-tool (libsecret-tools)")
        }
        let user: uid_t? = canSwitchUsers ? 65534 : nil
        let programs = try ClientPrograms()
        let services = programs.directory + "/services"
        try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
        let file = DeploymentTests.repository.appendingPathComponent("systemd/org.freedesktop.secrets.service")
        let text = try String(contentsOf: file, encoding: .utf8)
        XCTAssertTrue(text.contains("\nName=org.freedesktop.secrets\n"), text)
        XCTAssertTrue(text.contains("\nSystemdService=securityd.service\n"), text)
        try text.replacingOccurrences(of: "/usr/local/bin/securityd", with: TestDaemon.binary)
            .write(toFile: services + "/org.freedesktop.secrets.service", atomically: true, encoding: .utf8)
        chmod(services, 0o755)
        chmod(services + "/org.freedesktop.secrets.service", 0o644)
        let home = programs.directory + "/keychain"
        let socket = programs.directory + "/run/securityd.sock"
        for directory in [home, programs.directory + "/run"] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if let user { chown(directory, user, user) }
        }
        let bus = try TestBus(
            user: user, services: services, environment: ["KEYCHAIN_HOME": home, "KEYCHAIN_SOCKET": socket])
        let environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address, "KEYCHAIN_SOCKET": socket]
        defer {
            // The daemon the bus started outlives the bus: stopped here, by the pid its owner lock names.
            if let record = try? String(contentsOfFile: home + "/owner.lock", encoding: .utf8),
                let range = record.range(of: #"securityd pid (\d+)"#, options: .regularExpression),
                let pid = Int32(record[range].dropFirst("securityd pid ".count))
            {
                kill(pid, SIGTERM)
            }
        }
        let security = ClientPrograms.built("security")
        // The first call starts the daemon: an unregistered secret-tool meets the default policy (ask,
        // and nothing to ask with here), so the answer is a refusal from the daemon, not "no such name".
        let first = try ClientPrograms.run(
            "/usr/bin/secret-tool", ["lookup", "k", "v"], daemon: nil, environment: environment, user: user)
        XCTAssertNotEqual(first.status, 0)
        XCTAssertFalse(first.output.contains("was not provided by any .service files"), first.output)
        XCTAssertTrue(first.output.contains("Secret Service"), first.output)
        XCTAssertEqual(
            try ClientPrograms.run(
                security, ["app", "policy", "secret-service", "allow"], daemon: nil, environment: environment,
                user: user
            ).status, 0)
        XCTAssertEqual(
            try ClientPrograms.run(
                "/usr/bin/secret-tool", ["store", "--label=x", "k", "v"], daemon: nil, environment: environment,
                input: "activated", user: user
            ).status, 0)
        XCTAssertEqual(
            try ClientPrograms.run(
                "/usr/bin/secret-tool", ["lookup", "k", "v"], daemon: nil, environment: environment, user: user
            ).output, "activated")
    }
}

/// The portal backend, called as xdg-desktop-portal calls it: a compiled program (sd-bus) passing the
/// descriptor the app's secret is to be written to.
final class SecretServicePortalTests: SecretServiceTestCase {
    static let source = """
        #include <fcntl.h>
        #include <stdio.h>
        #include <systemd/sd-bus.h>
        /* portal APP-ID FILE: asks the backend for APP-ID's master secret, written into FILE. */
        int main(int argc, char **argv) {
            sd_bus *bus = NULL;
            sd_bus_message *reply = NULL;
            sd_bus_error error = SD_BUS_ERROR_NULL;
            if (argc != 3 || sd_bus_open_user(&bus) < 0) return 2;
            int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0) return 2;
            int r = sd_bus_call_method(bus, "org.freedesktop.secrets", "/org/freedesktop/portal/desktop",
                "org.freedesktop.impl.portal.Secret", "RetrieveSecret", &error, &reply, "osha{sv}",
                "/org/freedesktop/portal/desktop/request/1_1/t", argv[1], fd, 0);
            if (r < 0) { printf("error %s\\n", error.name); return 1; }
            unsigned response = 9;
            sd_bus_message_read(reply, "u", &response);
            printf("response %u\\n", response);
            return 0;
        }
        """

    func testThePortalGetsEachAppItsOwnStableSecretAndNobodyElseGetsAny() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/cc") else { throw XCTSkip("needs cc") }
        let source = programs.directory + "/portal.c"
        try Self.source.write(toFile: source, atomically: true, encoding: .utf8)
        let built = programs.directory + "/portal-built"
        let compiled = try ClientPrograms.run("/usr/bin/cc", ["-o", built, source, "-lsystemd"], daemon: nil)
        XCTAssertEqual(compiled.status, 0, compiled.output)
        let portal = try programs.copy(built, as: "libexec/xdg-desktop-portal")
        let impostor = try programs.copy(built, as: "other/xdg-desktop-portal")
        XCTAssertEqual(
            try security(
                "app", "register", portal, "--application-identifier", "org.freedesktop.portal.Desktop",
                "--access-group", "org.freedesktop.impl.portal.Secret"
            ).status, 0)
        try allowUnregisteredPrograms()
        let out = home + "/secret"
        func retrieve(_ program: String, _ appID: String) throws -> (String, Data?) {
            try? FileManager.default.removeItem(atPath: out)
            let result = try run(program, [appID, out])
            return (result.output, FileManager.default.contents(atPath: out))
        }
        let (first, firstSecret) = try retrieve(portal, "org.example.Notes")
        XCTAssertEqual(first, "response 0")
        XCTAssertEqual(firstSecret?.count, 64)
        XCTAssertEqual(try retrieve(portal, "org.example.Notes").1, firstSecret, "stable")
        let (_, otherSecret) = try retrieve(portal, "org.example.Mail")
        XCTAssertEqual(otherSecret?.count, 64)
        XCTAssertNotEqual(otherSecret, firstSecret)
        // No app id (an unsandboxed caller) or a malformed one: an error response, no secret.
        for appID in ["", "noDots", "org.1bad.App"] {
            let (response, secret) = try retrieve(portal, appID)
            XCTAssertEqual(response, "response 2", appID)
            XCTAssertEqual(secret, Data(), appID)
        }
        // Another program, allowed into the shared group by the policy, is not the portal.
        let (refused, none) = try retrieve(impostor, "org.example.Notes")
        XCTAssertEqual(refused, "error org.freedesktop.DBus.Error.AccessDenied")
        XCTAssertEqual(none, Data())
        // Nor does the shared group see the master secrets as items.
        XCTAssertEqual(try secretTool("search", "--all", "service", "org.freedesktop.impl.portal.Secret").output, "")
    }
}

/// Imports: a keyring gnome-keyring itself writes in the test, and a KWallet export, into the daemon's
/// Secret Service items, read back by a client of the bus.
final class SecretServiceImportTests: SecretServiceTestCase {
    /// A login keyring written by gnome-keyring-daemon (headless, on a bus of its own, as the test user)
    /// holding what `store` stores through secret-tool.
    func gnomeKeyring(password: String, store: [(label: String, attributes: [String], secret: String)]) throws
        -> String
    {
        let daemonPath = "/usr/bin/gnome-keyring-daemon"
        guard FileManager.default.isExecutableFile(atPath: daemonPath) else {
            throw XCTSkip("needs gnome-keyring")
        }
        let otherBus = try TestBus(user: user)
        let data = home + "/gnome-data"
        let runtime = home + "/gnome-runtime"
        for directory in [data, runtime] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            chmod(directory, 0o700)
            if let user { chown(directory, user, user) }
        }
        let environment = [
            "DBUS_SESSION_BUS_ADDRESS": otherBus.address, "HOME": home, "XDG_DATA_HOME": data,
            "XDG_RUNTIME_DIR": runtime,
        ]
        let keyring = Process()
        var command = [daemonPath, "--unlock", "--foreground", "--components=secrets"]
        if let user {
            command = ["/usr/bin/setpriv", "--reuid", "\(user)", "--regid", "\(user)", "--clear-groups"] + command
        }
        keyring.executableURL = URL(fileURLWithPath: command[0])
        keyring.arguments = Array(command.dropFirst())
        keyring.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let input = Pipe()
        keyring.standardInput = input
        keyring.standardOutput = FileHandle.nullDevice
        keyring.standardError = FileHandle.nullDevice
        try keyring.run()
        input.fileHandleForWriting.write(Data(password.utf8))
        try input.fileHandleForWriting.close()
        defer {
            kill(keyring.processIdentifier, SIGTERM)
            keyring.waitUntilExit()
        }
        for item in store {
            var stored = (status: Int32(1), output: "")
            let deadline = Date().addingTimeInterval(10)
            while stored.status != 0, Date() < deadline {
                stored = try ClientPrograms.run(
                    "/usr/bin/secret-tool", ["store", "--label=\(item.label)"] + item.attributes, daemon: nil,
                    environment: environment, input: item.secret, user: user)
                if stored.status != 0 { usleep(100_000) }
            }
            XCTAssertEqual(stored.status, 0, stored.output)
        }
        let file = data + "/keyrings/login.keyring"
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: file), Date() < deadline { usleep(50_000) }
        return file
    }

    func testAKeyringGnomeKeyringWroteIsImportedOnceWithItsPassword() throws {
        let file = try gnomeKeyring(
            password: "login-pw",
            store: [
                ("Mail", ["service", "mail", "user", "ann"], "s1"),
                ("Lines", ["xdg:schema", "org.example.Pw", "app", "demo"], "multi\nline"),
            ])
        try allowUnregisteredPrograms()
        let wrong = try security("import", "gnome-keyring", file, "-w", "not-it")
        XCTAssertEqual(wrong.status, 1)
        XCTAssertTrue(wrong.output.contains("the password is wrong"), wrong.output)
        let first = try security("import", "gnome-keyring", file, "-w", "login-pw")
        XCTAssertEqual(first.status, 0, first.output)
        XCTAssertTrue(first.output.contains("imported 2 of 2 secrets"), first.output)
        let again = try security("import", "gnome-keyring", file, "-w", "login-pw")
        XCTAssertTrue(
            again.output.contains("imported 0 of 2") && again.output.contains("left out 2: already present"),
            again.output)
        XCTAssertEqual(try secretTool("lookup", "service", "mail", "user", "ann").output, "s1")
        let lines = try python(
            """
            import secretstorage
            c = secretstorage.dbus_init()
            item = next(secretstorage.search_items(c, {'xdg:schema': 'org.example.Pw'}))
            print(item.get_label(), repr(item.get_secret()), item.collection.collection_path if hasattr(item, 'collection') else '')
            """)
        XCTAssertTrue(lines.output.hasPrefix("Lines b'multi\\nline'"), lines.output)
    }

    func testAKWalletExportIsImportedIntoItsWalletsCollection() throws {
        try allowUnregisteredPrograms()
        let export = home + "/wallet.xml"
        try """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE KWallet>
        <wallet name="Work">
         <folder name="Passwords">
          <password name="imap://ann@example.com">mail-secret</password>
          <map name="web"><mapentry name="login">ann</mapentry></map>
         </folder>
        </wallet>
        """.write(toFile: export, atomically: true, encoding: .utf8)
        chmod(export, 0o644)
        let result = try security("import", "kwallet", export)
        XCTAssertTrue(result.output.contains("imported 2 of 2 secrets"), result.output)
        let found = try python(
            """
            import secretstorage
            c = secretstorage.dbus_init()
            work = [x for x in secretstorage.get_all_collections(c) if x.get_label() == 'Work'][0]
            item = next(work.search_items({'kwallet.key': 'imap://ann@example.com'}))
            print(item.get_secret().decode(), sorted(i.get_label() for i in work.get_all_items()))
            """)
        XCTAssertEqual(found.output, "mail-secret ['imap://ann@example.com', 'web']", found.output)
        let damaged = home + "/damaged.xml"
        try "<wallet name=\"x\"><folder name=\"f\">".write(toFile: damaged, atomically: true, encoding: .utf8)
        chmod(damaged, 0o644)
        let refused = try security("import", "kwallet", damaged)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.output.contains("never comes"), refused.output)
    }
}

/// Sandboxed apps: a process in a sandbox of its own (its own user and mount namespaces, a root with
/// Flatpak's `/.flatpak-info`), as Flatpak runs an app with `--talk-name=org.freedesktop.secrets`.
final class SecretServiceFlatpakTests: SecretServiceTestCase {
    /// Runs `arguments` inside a sandbox whose `/.flatpak-info` names `info` as its app id, or, for
    /// `info` `fifo` or `zero`, is not a file at all: a FIFO, or a link to /dev/zero.
    func sandboxed(_ info: String, _ arguments: [String], input: String? = nil) throws -> (
        status: Int32, output: String
    ) {
        let script = programs.directory + "/sandbox.sh"
        if !FileManager.default.fileExists(atPath: script) {
            try #"""
            #!/bin/sh
            # sandbox.sh INFO COMMAND...: COMMAND in its own user and mount namespaces, chrooted into a
            # root that holds /usr, /etc, /dev, /tmp and a /.flatpak-info naming the app id INFO (or, for
            # INFO fifo or zero, a FIFO or a link to /dev/zero in its place).
            set -e
            root=$(mktemp -d)
            exec unshare -Urm /bin/sh -c '
              root="$1"; info="$2"; shift 2
              mount -t tmpfs none "$root"
              mkdir -p "$root/usr" "$root/etc" "$root/tmp" "$root/dev"
              ln -s usr/bin "$root/bin"; ln -s usr/lib "$root/lib"; ln -s usr/lib64 "$root/lib64"
              for directory in usr etc tmp dev; do mount --rbind "/$directory" "$root/$directory"; done
              case "$info" in
                fifo) mkfifo "$root/.flatpak-info" ;;
                zero) ln -s /dev/zero "$root/.flatpak-info" ;;
                *) printf "[Application]\nname=%s\nruntime=runtime/org.example.Platform/x86_64/1\n" "$info" > "$root/.flatpak-info" ;;
              esac
              exec chroot "$root" "$@"
            ' sandbox "$root" "$@"
            """#.write(toFile: script, atomically: true, encoding: .utf8)
            chmod(script, 0o755)
        }
        return try run(script, [info] + arguments, input: input)
    }

    func testEachSandboxedAppSeesOnlyItsOwnItems() throws {
        let probe = try sandboxed("org.example.Probe", ["/bin/true"])
        guard probe.status == 0 else { throw XCTSkip("no unprivileged user namespaces here: \(probe.output)") }
        try allowUnregisteredPrograms()
        XCTAssertEqual(try secretTool("store", "--label=shared", "k", "v", input: "for-everyone").status, 0)
        let stored = try sandboxed(
            "org.example.Notes", ["/usr/bin/secret-tool", "store", "--label=n", "k", "v"], input: "notes-own")
        XCTAssertEqual(stored.status, 0, stored.output + daemon.log)
        XCTAssertEqual(
            try sandboxed("org.example.Notes", ["/usr/bin/secret-tool", "lookup", "k", "v"]).output, "notes-own")
        // Another app, and programs outside any sandbox, see none of it; nor does the app see theirs.
        XCTAssertEqual(try sandboxed("org.example.Mail", ["/usr/bin/secret-tool", "lookup", "k", "v"]).status, 1)
        XCTAssertEqual(try secretTool("lookup", "k", "v").output, "for-everyone")
        XCTAssertEqual(try secretTool("search", "--all", "k", "v").output.components(separatedBy: "label = ").count, 2)
        // The default alias stays the login collection, and a collection is deleted only by its maker.
        let made = try python(
            """
            import secretstorage
            c = secretstorage.dbus_init()
            print(secretstorage.create_collection(c, 'Made outside').collection_path)
            """)
        XCTAssertTrue(made.output.hasPrefix("/org/freedesktop/secrets/collection/madeoutside"), made.output)
        let inside = try sandboxed(
            "org.example.Notes",
            [
                "/usr/bin/python3", "-c",
                """
                import os
                # This sandbox maps the user to root inside (Flatpak keeps the uid): jeepney names the
                # uid it authenticates as, so it is told the one the bus sees.
                os.geteuid = lambda: \(user ?? getuid())
                import secretstorage
                from jeepney import DBusAddress, new_method_call, HeaderFields
                c = secretstorage.dbus_init()
                def call(path, interface, method, signature=None, *body):
                    address = DBusAddress(path, bus_name='org.freedesktop.secrets', interface=interface)
                    reply = c.send_and_get_reply(new_method_call(address, method, signature, body))
                    return reply.header.fields.get(HeaderFields.error_name, 'ok')
                print(call('/org/freedesktop/secrets/collection/madeoutside', 'org.freedesktop.Secret.Collection', 'Delete'))
                print(call('/org/freedesktop/secrets', 'org.freedesktop.Secret.Service', 'SetAlias', 'so', 'default', '/org/freedesktop/secrets/collection/madeoutside'))
                """,
            ])
        XCTAssertEqual(
            inside.output,
            "org.freedesktop.DBus.Error.AccessDenied\norg.freedesktop.DBus.Error.AccessDenied", inside.output)
        // A sandbox whose /.flatpak-info is a FIFO (or a link to /dev/zero) is no app at all, and holds
        // up nobody.
        for kind in ["fifo", "zero"] {
            let hostile = try sandboxed(kind, ["/usr/bin/secret-tool", "lookup", "k", "v"])
            XCTAssertNotEqual(hostile.status, 0, kind)
            XCTAssertEqual(try secretTool("lookup", "k", "v").output, "for-everyone", kind)
        }
        // Under deny, a sandboxed app is refused like any other program.
        XCTAssertEqual(try security("app", "policy", "secret-service", "deny").status, 0)
        daemon.stop()
        try daemon.start()
        try waitForName()
        let denied = try sandboxed("org.example.Notes", ["/usr/bin/secret-tool", "lookup", "k", "v"])
        XCTAssertNotEqual(denied.status, 0)
        XCTAssertTrue(denied.output.contains("org.example.Notes is refused"), denied.output)
    }
}
