import Foundation
import Security
import XCTest

final class SecurityCommandTests: XCTestCase {
    private var cli: CommandRunner!

    override func setUp() { cli = CommandRunner() }
    override func tearDown() { cli = nil }

    private let notFound =
        "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain.\n"

    func testAddFindDeleteGenericPassword() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "alice", "-s", "web", "-w", "hunter2").status, 0)
        let found = try cli.run("find-generic-password", "-s", "web", "-w")
        XCTAssertEqual(found.status, 0)
        XCTAssertEqual(found.stdout, "hunter2\n")
        XCTAssertEqual(found.stderr, "")
        let both = try cli.run("find-generic-password", "-s", "web", "-g", "-w")
        XCTAssertEqual(both.stdout, "hunter2\n", "-w prints the password alone, even with -g")
        XCTAssertEqual(both.stderr, "")

        let duplicate = try cli.run("add-generic-password", "-a", "alice", "-s", "web", "-w", "other")
        XCTAssertEqual(duplicate.status, 45)
        XCTAssertEqual(
            duplicate.stderr,
            "security: SecKeychainItemCreateFromContent (<default>): The specified item already exists in the keychain.\n"
        )
        XCTAssertFalse(duplicate.stderr.contains("other"), "secrets never appear in messages")

        XCTAssertEqual(try cli.run("add-generic-password", "-a", "alice", "-s", "web", "-U", "-w", "updated").status, 0)
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "alice", "-w").stdout, "updated\n")

        let deleted = try cli.run("delete-generic-password", "-a", "alice", "-s", "web")
        XCTAssertEqual(deleted.status, 0)
        XCTAssertTrue(deleted.stdout.hasPrefix("keychain: \""), deleted.stdout)
        XCTAssertTrue(deleted.stdout.hasSuffix("password has been deleted.\n"))
        let again = try cli.run("delete-generic-password", "-a", "alice", "-s", "web")
        XCTAssertEqual(again.status, 44)
        XCTAssertEqual(again.stderr, notFound)
        let missing = try cli.run("find-generic-password", "-s", "web")
        XCTAssertEqual(missing.status, 44)
        XCTAssertEqual(missing.stderr, notFound)
    }

    func testAttributeBlockLayout() throws {
        XCTAssertEqual(
            try cli.run(
                "add-generic-password", "-a", "bob", "-s", "mail", "-j", "a comment", "-D", "kind", "-G", "generic",
                "-c", "abcd", "-C", "wxyz", "-w", "pw"
            ).status, 0)
        let block = try cli.run("find-generic-password", "-s", "mail", "-g")
        XCTAssertEqual(block.status, 0)
        let lines = block.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines[0], "keychain: \"\(cli.home)/keychain.db\"")
        XCTAssertEqual(lines[1], "version: 512")
        XCTAssertEqual(lines[2], "class: \"genp\"")
        XCTAssertEqual(lines[3], "attributes:")
        XCTAssertEqual(lines[4], "    0x00000007 <blob>=\"mail\"", "the label defaults to the service")
        for expected in [
            "    \"acct\"<blob>=\"bob\"", "    \"svce\"<blob>=\"mail\"", "    \"icmt\"<blob>=\"a comment\"",
            "    \"desc\"<blob>=\"kind\"", "    \"gena\"<blob>=\"generic\"", "    \"crtr\"<uint32>=\"abcd\"",
            "    \"type\"<uint32>=\"wxyz\"", "    \"invi\"<sint32>=<NULL>",
        ] {
            XCTAssertTrue(lines.contains(expected), "missing \(expected) in\n\(block.stdout)")
        }
        XCTAssertTrue(lines.contains { $0.hasPrefix("    \"cdat\"<timedate>=0x") && $0.hasSuffix("Z\\000\"") })
        XCTAssertEqual(block.stderr, "password: \"pw\"\n")
        XCTAssertFalse(block.stdout.contains("pw\""), "-g prints the password on standard error only")
        // Matching by the other attributes.
        XCTAssertEqual(try cli.run("find-generic-password", "-c", "abcd", "-w").stdout, "pw\n")
        XCTAssertEqual(try cli.run("find-generic-password", "-G", "generic", "-j", "a comment", "-w").stdout, "pw\n")
        XCTAssertEqual(try cli.run("find-generic-password", "-c", "dcba", "-w").status, 44)
    }

    func testBinaryPasswordsAndLegacyFlags() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "bin", "-s", "hex", "-X", "00ff41").status, 0)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "hex", "-w").stdout, "00FF41\n")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "hex").stderr, "")
        XCTAssertEqual(
            try cli.run("find-generic-password", "-s", "hex", "-g").stderr, "password: 0x00FF41  \"\\000\\377A\"\n")
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "legacy", "-s", "old", "-p", "via-p").status, 0)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "old", "-w").stdout, "via-p\n")
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "x", "-s", "bad", "-X", "zz").status, 2)
    }

    func testPasswordFromStandardInputWhenWIsLast() throws {
        let added = try cli.run(["add-generic-password", "-a", "pipe", "-s", "stdin", "-w"], input: "from-a-pipe\n")
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "stdin", "-w").stdout, "from-a-pipe\n")
    }

    func testPromptTwiceWithoutEchoOnATerminal() throws {
        let (result, screen) = try cli.runOnTerminal(
            ["add-generic-password", "-a", "tty", "-s", "prompt", "-w"],
            answers: [
                ("password data for new item: ", "typed-secret"), ("retype password for new item: ", "typed-secret"),
            ])
        XCTAssertEqual(result.status, 0, screen)
        XCTAssertTrue(screen.contains("password data for new item: "), screen)
        XCTAssertTrue(screen.contains("retype password for new item: "), screen)
        XCTAssertFalse(screen.contains("typed-secret"), "the password must not be echoed: \(screen)")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "prompt", "-w").stdout, "typed-secret\n")

        let (mismatch, _) = try cli.runOnTerminal(
            ["add-generic-password", "-a", "tty2", "-s", "prompt", "-w"],
            answers: [("password data for new item: ", "one"), ("retype password for new item: ", "two")])
        XCTAssertEqual(mismatch.status, 1)
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "tty2").status, 44)
    }

    func testInternetPasswords() throws {
        let add = try cli.run(
            "add-internet-password", "-a", "me", "-s", "example.com", "-r", "htps", "-P", "8443", "-p", "/login",
            "-d", "realm", "-t", "dflt", "-w", "web-pw")
        XCTAssertEqual(add.status, 0, add.stderr)
        let block = try cli.run("find-internet-password", "-s", "example.com", "-r", "htps")
        XCTAssertEqual(block.status, 0)
        for expected in [
            "class: \"inet\"", "    \"srvr\"<blob>=\"example.com\"", "    \"ptcl\"<uint32>=\"htps\"",
            "    \"port\"<uint32>=0x000020FB ", "    \"path\"<blob>=\"/login\"", "    \"sdmn\"<blob>=\"realm\"",
            "    \"atyp\"<blob>=\"dflt\"", "    0x00000007 <blob>=\"example.com\"",
        ] {
            XCTAssertTrue(block.stdout.contains(expected + "\n"), "missing \(expected) in\n\(block.stdout)")
        }
        XCTAssertEqual(
            try cli.run("find-internet-password", "-s", "example.com", "-P", "8443", "-w").stdout, "web-pw\n")
        XCTAssertEqual(try cli.run("find-internet-password", "-s", "example.com", "-P", "80").status, 44)
        XCTAssertEqual(try cli.run("delete-internet-password", "-s", "example.com").status, 0)
        XCTAssertEqual(try cli.run("find-internet-password", "-s", "example.com").status, 44)
        XCTAssertEqual(try cli.run("add-internet-password", "-s", "x", "-P", "notaport").status, 2)
        XCTAssertEqual(try cli.run("add-internet-password", "-s", "x", "-r", "toolong").status, 2)
    }

    /// `-w` alone asks the keychain service directly, without the Security API's objects: every flag must
    /// match there as it does in the attribute search, and a miss must fail alike.
    func testThePasswordAloneMatchesEveryFlagAsTheAttributeSearchDoes() throws {
        // Items go to the first group; the second is one this process may search.
        cli.accessGroups = "TEAM.cli,TEAM.shared"
        XCTAssertEqual(
            try cli.run(
                "add-internet-password", "-a", "me", "-s", "example.com", "-r", "htps", "-P", "8443", "-p", "/login",
                "-d", "realm", "-t", "dflt", "-l", "label", "-j", "note", "-D", "kind", "-c", "abcd", "-C", "wxyz",
                "-w", "web-pw"
            ).status, 0)
        XCTAssertEqual(
            try cli.run("add-generic-password", "-a", "me", "-s", "svc", "-G", "gen", "-w", "generic-pw").status, 0)
        let internetMatches: [[String]] = [
            ["-a", "me"], ["-s", "example.com"], ["-r", "htps"], ["-P", "8443"], ["-p", "/login"], ["-d", "realm"],
            ["-t", "dflt"], ["-l", "label"], ["-j", "note"], ["-D", "kind"], ["-c", "abcd"], ["-C", "wxyz"],
            ["--synchronizable", "no"], ["--synchronizable", "any"], ["--access-group", "TEAM.cli"],
        ]
        let internetMisses: [[String]] = [
            ["-a", "you"], ["-r", "http"], ["-P", "80"], ["-p", "/"], ["-d", "other"], ["-t", "ntlm"], ["-l", "x"],
            ["-c", "dcba"], ["--synchronizable", "yes"], ["--access-group", "TEAM.shared"],
        ]
        for flags in internetMatches {
            let alone = try cli.run(["find-internet-password"] + flags + ["-w"])
            XCTAssertEqual(alone.stdout, "web-pw\n", "\(flags): \(alone.stderr)")
            XCTAssertEqual(alone.status, 0)
            XCTAssertEqual(try cli.run(["find-internet-password"] + flags).status, 0, "\(flags)")
        }
        for flags in internetMisses {
            let alone = try cli.run(["find-internet-password"] + flags + ["-w"])
            let block = try cli.run(["find-internet-password"] + flags)
            XCTAssertEqual(alone.status, 44, "\(flags)")
            XCTAssertEqual(alone.stderr, notFound, "\(flags)")
            XCTAssertEqual(alone.stdout, "")
            XCTAssertEqual(block.status, 44, "\(flags)")
            XCTAssertEqual(block.stderr, notFound, "\(flags)")
        }
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "svc", "-G", "gen", "-w").stdout, "generic-pw\n")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "svc", "-G", "other", "-w").status, 44)
        // The classes stay apart: a generic search does not find the internet item by its account.
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "example.com", "-w").status, 44)
        // Bad values are usage errors before anything is asked, as in the attribute search.
        for flags in [["-P", "port"], ["-r", "toolong"], ["--synchronizable", "maybe"]] {
            XCTAssertEqual(try cli.run(["find-internet-password"] + flags + ["-w"]).status, 2, "\(flags)")
        }
    }

    func testAccessibilityGroupAndJSON() throws {
        cli.accessGroups = "TEAM.cli,TEAM.shared"
        XCTAssertEqual(
            try cli.run(
                "add-generic-password", "-a", "j", "-s", "json", "-A", "WhenUnlockedThisDeviceOnly", "-g",
                "TEAM.shared", "-w", "pw"
            )
            .status, 0)
        let json = try cli.run("find-generic-password", "-s", "json", "--json")
        XCTAssertEqual(json.status, 0)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(object["pdmn"] as? String, "aku")
        XCTAssertEqual(object["agrp"] as? String, "TEAM.shared")
        XCTAssertEqual(object["acct"] as? String, "j")
        XCTAssertEqual(object["class"] as? String, "genp")
        XCTAssertNil(object["v_Data"], "no data unless asked")
        let withData = try cli.run("find-generic-password", "-s", "json", "--json", "-w")
        let dataObject = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(withData.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(dataObject["v_Data"] as? String, "pw")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "json", "--access-group", "TEAM.cli").status, 44)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "json", "--access-group", "TEAM.shared").status, 0)
        let unknown = try cli.run("add-generic-password", "-a", "j2", "-s", "json", "-A", "Sometimes")
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("Usage: add-generic-password"))
        let entitlement = try cli.run("add-generic-password", "-a", "j3", "-s", "json", "-g", "TEAM.not.mine")
        XCTAssertEqual(entitlement.status, Int32(UInt32(bitPattern: errSecMissingEntitlement) & 0xff))
        XCTAssertTrue(entitlement.stderr.hasSuffix("A required entitlement isn't present.\n"))
    }

    func testDumpKeychain() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "a", "-s", "dump1", "-w", "secret-one").status, 0)
        XCTAssertEqual(
            try cli.run("add-internet-password", "-a", "b", "-s", "dump2.example", "-w", "secret-two").status, 0)
        let plain = try cli.run("dump-keychain")
        XCTAssertEqual(plain.status, 0)
        XCTAssertEqual(plain.stdout.components(separatedBy: "keychain: ").count - 1, 2)
        XCTAssertFalse(plain.stdout.contains("secret-one"))
        let withData = try cli.run("dump-keychain", "-d")
        XCTAssertTrue(withData.stdout.contains("data:\n\"secret-one\""))
        XCTAssertTrue(withData.stdout.contains("data:\n\"secret-two\""))
        let json = try cli.run("dump-keychain", "--json")
        let array = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(Set(array.compactMap { $0["class"] as? String }), ["genp", "inet"])
        XCTAssertTrue(array.allSatisfy { $0["v_Data"] == nil })
        let jsonData = try cli.run("dump-keychain", "--json", "-d")
        XCTAssertTrue(jsonData.stdout.contains("\"v_Data\" : \"secret-two\""))
    }

    func testUsageErrorsHelpAndErrorVerb() throws {
        let noVerb = try cli.run([])
        XCTAssertEqual(noVerb.status, 2)
        XCTAssertTrue(noVerb.stderr.contains("Usage: security <command>"))
        let unknown = try cli.run("frobnicate")
        XCTAssertEqual(unknown.status, 2)
        let missingValue = try cli.run("find-generic-password", "-s")
        XCTAssertEqual(missingValue.status, 2)
        XCTAssertTrue(missingValue.stderr.contains("Usage: find-generic-password"))
        let badOption = try cli.run("find-generic-password", "-Z")
        XCTAssertEqual(badOption.status, 2)
        XCTAssertEqual(try cli.run("help").status, 0)
        let help = try cli.run("help", "find-internet-password")
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.hasPrefix("Usage: find-internet-password"))
        let error = try cli.run("error", "-25300")
        XCTAssertEqual(
            error.stdout, "Error: 0xFFFF9D2C -25300 The specified item could not be found in the keychain.\n")
        XCTAssertEqual(
            try cli.run("error", "-25299").stdout,
            "Error: 0xFFFF9D2D -25299 The specified item already exists in the keychain.\n")
        XCTAssertEqual(
            try cli.run("error", "0xFFFF9D2C").stdout,
            "Error: 0xFFFF9D2C -25300 The specified item could not be found in the keychain.\n")
        XCTAssertEqual(try cli.run("error", "-1").stdout, "Error: 0xFFFFFFFF -1 OSStatus -1\n")
        XCTAssertEqual(try cli.run("error", "nonsense").status, 2)
    }

    func testPasscodeLockAndUnlock() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "a", "-s", "locked", "-w", "class-a").status, 0)
        XCTAssertEqual(
            try cli.run("add-generic-password", "-a", "d", "-s", "always", "-A", "Always", "-w", "class-d").status, 0)
        XCTAssertEqual(try cli.run("set-keychain-password", "-p", "1234").status, 0)
        let info = try cli.run("show-keychain-info")
        XCTAssertTrue(info.stdout.contains("passcode: set"), info.stdout)
        XCTAssertTrue(info.stdout.contains("state: locked (before first unlock)"), info.stdout)

        // Each process starts before the first unlock: class A is out of reach without a terminal.
        let locked = try cli.run("find-generic-password", "-s", "locked", "-w")
        XCTAssertEqual(locked.status, Int32(UInt32(bitPattern: errSecInteractionNotAllowed) & 0xff))
        XCTAssertTrue(
            locked.stderr.hasPrefix("security: SecKeychainSearchCopyNext: User interaction is not allowed. ("),
            locked.stderr)
        XCTAssertTrue(locked.stderr.contains("security unlock-keychain --session"), locked.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "always", "-w").stdout, "class-d\n")

        let wrong = try cli.run("unlock-keychain", "-p", "9999")
        XCTAssertEqual(wrong.status, Int32(UInt32(bitPattern: errSecAuthFailed) & 0xff))
        XCTAssertEqual(try cli.run(["unlock-keychain"], input: "1234\n").status, 0)
        XCTAssertTrue(try cli.run("show-keychain-info").stdout.contains("failed attempts: 0"))
        XCTAssertEqual(try cli.run("lock-keychain").status, 0)

        // On a terminal, a locked item prompts for the passcode and the command goes on.
        let (unlocked, screen) = try cli.runOnTerminal(
            ["find-generic-password", "-s", "locked", "-w"], answers: [("password to unlock default: ", "1234")])
        XCTAssertEqual(unlocked.status, 0, screen)
        XCTAssertEqual(unlocked.stdout, "class-a\n")
        XCTAssertFalse(screen.contains("1234"))

        XCTAssertEqual(try cli.run("set-keychain-password", "-o", "1234", "-p", "5678").status, 0)
        XCTAssertEqual(
            try cli.run("unlock-keychain", "-p", "1234").status, Int32(UInt32(bitPattern: errSecAuthFailed) & 0xff))
        // Removing needs confirmation: refused without a terminal unless -y.
        let refused = try cli.run("set-keychain-password", "-o", "5678", "-p", "")
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(try cli.run("show-keychain-info").stdout.contains("passcode: set"))
        XCTAssertEqual(try cli.run("set-keychain-password", "-o", "5678", "-p", "", "-y").status, 0)
        XCTAssertTrue(try cli.run("show-keychain-info").stdout.contains("passcode: not set"))
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "locked", "-w").stdout, "class-a\n")
    }

    func testRoundTripWithTheSecurityAPI() throws {
        setenv("KEYCHAIN_HOME", cli.home, 1)
        setenv("KEYCHAIN_ACCESS_GROUPS", cli.accessGroups ?? "", 1)
        setenv("KEYCHAIN_LOG", "off", 1)
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "cli", "-s", "roundtrip", "-w", "from-cli").status, 0)
        var result: CFTypeRef?
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "roundtrip",
            kSecAttrAccount as String: "cli", kSecReturnData as String: true,
        ]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("from-cli".utf8))

        let added: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "roundtrip",
            kSecAttrAccount as String: "api", kSecValueData as String: Data("from-api".utf8),
        ]
        XCTAssertEqual(SecItemAdd(added as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "roundtrip", "-a", "api", "-w").stdout, "from-api\n")
    }

    /// Without `KEYCHAIN_ACCESS_GROUPS` a program's group is its application identifier: the
    /// `CFBundleIdentifier` of an Info.plist beside the executable, else the executable's name.
    func testDefaultAccessGroupIsTheApplicationIdentifier() throws {
        let bundle = cli.home + "-bundle"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: bundle) }
        let copy = bundle + "/keychain-tool"
        try FileManager.default.copyItem(atPath: CommandRunner.executable, toPath: copy)
        // The verbs the lean half hands on run in its companion, beside it.
        try FileManager.default.copyItem(atPath: CommandRunner.executable + "-full", toPath: bundle + "/security-full")

        cli.accessGroups = nil
        cli.executable = copy
        XCTAssertEqual(try cli.run("add-generic-password", "-s", "named", "-a", "by-name", "-w", "1").status, 0)
        let plist = try PropertyListSerialization.data(
            fromPropertyList: ["CFBundleIdentifier": "com.example.tool"], format: .xml, options: 0)
        try plist.write(to: URL(fileURLWithPath: bundle + "/Info.plist"))
        XCTAssertEqual(try cli.run("add-generic-password", "-s", "named", "-a", "by-plist", "-w", "2").status, 0)

        cli.executable = CommandRunner.executable
        func group(ofAccount account: String) throws -> String? {
            let found = try cli.run("find-generic-password", "-a", account, "--json")
            guard found.status == 0 else { return nil }
            let object = try JSONSerialization.jsonObject(with: Data(found.stdout.utf8)) as? [String: Any]
            return object?["agrp"] as? String
        }
        cli.accessGroups = "keychain-tool"
        XCTAssertEqual(try group(ofAccount: "by-name"), "keychain-tool")
        XCTAssertNil(try group(ofAccount: "by-plist"), "another application's item")
        cli.accessGroups = "com.example.tool"
        XCTAssertEqual(try group(ofAccount: "by-plist"), "com.example.tool")
        XCTAssertNil(try group(ofAccount: "by-name"))
    }

    /// Each run closes the database on the way out, so the last process folds the write-ahead log into
    /// the database and the next one opens it without replaying a log.
    func testCommandLeavesNoWriteAheadLog() throws {
        for index in 0..<20 {
            XCTAssertEqual(try cli.run("add-generic-password", "-s", "wal", "-a", "\(index)", "-w", "x").status, 0)
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: cli.home)
        XCTAssertTrue(files.contains("keychain.db"))
        XCTAssertFalse(files.contains("keychain.db-wal"), "\(files)")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "wal", "-a", "19", "-w").stdout, "x\n")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "wal", "-a", "20").status, 44)
    }

    /// The command is its own process and skips the system OpenSSL configuration (a start-up cost); a
    /// configuration that would stop the keychain's algorithms from loading shows it: a program that
    /// reads it cannot open the keychain, the command can.
    func testCommandIgnoresTheOpenSSLConfiguration() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-s", "conf", "-a", "a", "-w", "secret").status, 0)
        let configuration = cli.home + "-openssl.cnf"
        try Data(
            """
            openssl_conf = openssl_init
            [openssl_init]
            alg_section = evp_properties
            [evp_properties]
            default_properties = fips=yes

            """.utf8
        ).write(to: URL(fileURLWithPath: configuration))
        defer { try? FileManager.default.removeItem(atPath: configuration) }
        cli.extraEnvironment["OPENSSL_CONF"] = configuration

        XCTAssertEqual(try cli.run("find-generic-password", "-s", "conf", "-a", "a", "-w").stdout, "secret\n")
        let helper = URL(fileURLWithPath: CommandRunner.executable).deletingLastPathComponent()
            .appendingPathComponent("keychain-test-helper").path
        let text = try cli.run(program: helper, ["read", "conf", "a"]).stdout
        XCTAssertEqual(text, "status \(errSecNotAvailable)\n", "a program reading the configuration fails")
    }

    /// The README's main-job command, run as written (after the install and build steps, which CI did).
    func testReadmeMainJobCommand() throws {
        let readme = try String(contentsOfFile: Self.packageRoot + "/README.md", encoding: .utf8)
        guard
            let line = readme.split(separator: "\n").first(where: { $0.hasPrefix("apt-get update && apt-get install") })
        else {
            return XCTFail("the README has no set-up and main-job command")
        }
        let steps = line.components(separatedBy: " && ")
        let job = steps.drop { !$0.contains(".build/release/security") }.joined(separator: " && ")
        XCTAssertFalse(job.isEmpty, "the main job runs the security command: \(line)")
        // The release binary when the README's test command built it (its static link is what a user
        // runs), else the debug one beside these tests.
        let release = Self.packageRoot + "/.build/release/security"
        let binary = FileManager.default.isExecutableFile(atPath: release) ? release : CommandRunner.executable
        let script = job.replacingOccurrences(of: ".build/release/security", with: binary)
        let result = try cli.run(program: "/bin/bash", ["-c", script])
        XCTAssertEqual(result.status, 0, script)
        XCTAssertFalse(result.stdout.isEmpty)
    }

    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }
}

/// What the command's binaries load at every start. The lean `security`: neither Foundation (only
/// FoundationEssentials) nor any of OpenSSL or SQLite (libcrypto is loaded when the embedded keychain
/// first needs it, libsqlite3 when a database is opened). `security-full`: libssl only when sync opens a
/// TLS connection and libsqlite3 only when a database is opened, never at start, directly or through
/// another library.
final class CommandLinkTests: XCTestCase {
    private func linkedLibraries(of binary: String) throws -> String {
        let ldd = Process()
        ldd.executableURL = URL(fileURLWithPath: "/usr/bin/ldd")
        ldd.arguments = [binary]
        let output = Pipe()
        ldd.standardOutput = output
        try ldd.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        ldd.waitUntilExit()
        XCTAssertEqual(ldd.terminationStatus, 0)
        XCTAssertTrue(text.contains("libc.so.6"), text)
        return text
    }

    func testTheLeanCommandLinksNeitherFoundationNorOpenSSLNorSQLite() throws {
        let text = try linkedLibraries(of: CommandRunner.executable)
        for library in ["libcrypto", "libssl", "libsqlite3", "libFoundation.so", "libFoundationInternationalization"] {
            XCTAssertFalse(text.contains(library), "\(library) is not linked:\n\(text)")
        }
    }

    func testTheFullCommandLoadsNeitherLibsslNorSQLiteAtStart() throws {
        let text = try linkedLibraries(of: CommandRunner.executable + "-full")
        XCTAssertFalse(text.contains("libssl"), "libssl is loaded on first use:\n\(text)")
        XCTAssertFalse(text.contains("libsqlite3"), "libsqlite3 is loaded on first use:\n\(text)")
    }
}
