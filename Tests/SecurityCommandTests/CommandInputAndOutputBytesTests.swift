import Foundation
import XCTest

/// How the `security` command takes its input and writes its output: passcodes and passwords from
/// standard input (with a limit), arguments and homes that are not UTF-8, leftover arguments, secrets
/// with control characters printed safely, JSON escapes.
final class CommandInputAndOutputBytesTests: XCTestCase {
    private var cli: CommandRunner!

    override func setUp() { cli = CommandRunner() }
    override func tearDown() { cli = nil }

    /// Without a terminal, `set-keychain-password` took the new passcode only as `-p`, where every user
    /// sees it in `ps`. Standard input now gives the passcodes, one per line.
    func testPasscodesFromStandardInput() throws {
        XCTAssertEqual(try cli.run(["set-keychain-password"], input: "2468\n").status, 0)
        XCTAssertEqual(try cli.run(["unlock-keychain"], input: "2468\n").status, 0)
        // Change: the current passcode, then the new one.
        XCTAssertEqual(try cli.run(["set-keychain-password"], input: "2468\n1357\n").status, 0)
        XCTAssertEqual(try cli.run(["unlock-keychain"], input: "2468\n").status, 51, "the old one no longer opens")
        XCTAssertEqual(try cli.run(["unlock-keychain"], input: "1357\n").status, 0)
        let missing = try cli.run(["set-keychain-password"], input: "1357\n")
        XCTAssertEqual(missing.status, 2, "no new passcode given: \(missing.stderr)")
    }

    /// Arguments that are not UTF-8 became U+FFFD: accounts `\xff` and `\xfe` collided (the second add
    /// got 45, and finding `\xfe` returned the first item's secret). The bytes are kept now.
    func testArgumentsThatAreNotUTF8KeepTheirBytes() throws {
        func run(_ script: String, _ arguments: String...) throws -> CommandResult {
            try cli.run(program: "/bin/sh", ["-c", script, cli.executable] + arguments)
        }
        let add = "exec \"$0\" add-generic-password -a \"$(printf \"$1\")\" -s bytes -w \"$2\""
        XCTAssertEqual(try run(add, "\\377", "first").status, 0)
        XCTAssertEqual(try run(add, "\\376", "second").status, 0, "a different account")
        let find = "exec \"$0\" find-generic-password -a \"$(printf \"$1\")\" -s bytes -w"
        XCTAssertEqual(try run(find, "\\376").stdout, "second\n")
        XCTAssertEqual(try run(find, "\\377").stdout, "first\n")
        // Shown as macOS shows bytes that are not text.
        let shown = try run("exec \"$0\" find-generic-password -a \"$(printf \"$1\")\" -s bytes", "\\376")
        XCTAssertTrue(shown.stdout.contains("\"acct\"<blob>=0xFE  \"\\376\""), shown.stdout)
    }

    /// `-w` not given last takes the next argument as the password, as getopt does; what it leaves
    /// behind is a keychain name to macOS, which fails. `-w -A WhenPasscodeSetThisDeviceOnly` stored the
    /// password "-A" in class `ak` and ignored the rest.
    func testLeftoverArgumentsAreKeychainNamesAndFail() throws {
        let result = try cli.run(
            "add-generic-password", "-a", "a", "-s", "left", "-w", "-A", "WhenPasscodeSetThisDeviceOnly")
        XCTAssertEqual(result.status, 50, "errSecNoSuchKeychain (-25294): \(result.stderr)")
        XCTAssertFalse(result.stderr.contains("WhenPasscodeSetThisDeviceOnly"), "what is left may be a secret")
        XCTAssertTrue(result.stderr.contains("names a keychain"), result.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "left").status, 44, "nothing was stored")
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "left", "other.keychain").status, 50)
        XCTAssertEqual(try cli.run("dump-keychain", "other.keychain").status, 50)
        XCTAssertEqual(try cli.run("lock-keychain", "other.keychain").status, 50)
        // The keychain's own database names it.
        XCTAssertEqual(
            try cli.run("add-generic-password", "-a", "a", "-s", "left", "-w", "x", cli.home + "/keychain.db").status, 0
        )
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "left", "-w", cli.home).stdout, "x\n")
    }

    /// A 10 MiB secret took some 20 s and 235 MB to print; C1 control characters (U+009B, a terminal's
    /// CSI) were printed raw while ESC was escaped.
    func testLargeAndControlSecretsPrintSafely() throws {
        var large = Data(count: 10 << 20)
        for index in stride(from: 0, to: large.count, by: 4096) {
            large[index] = UInt8(truncatingIfNeeded: index >> 12)
        }
        let file = cli.home + "-secret"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try large.write(to: URL(fileURLWithPath: file))
        let add = try cli.run(
            program: "/bin/sh",
            ["-c", "exec \"$0\" add-generic-password -a big -s big -w < \"$1\"", cli.executable, file])
        XCTAssertEqual(add.status, 0, add.stderr)
        let found = try cli.run("find-generic-password", "-s", "big", "-w")
        XCTAssertEqual(found.status, 0)
        XCTAssertEqual(found.stdout.count, large.count * 2 + 1, "hex of every byte and a newline")
        XCTAssertTrue(found.stdout.hasPrefix("00000000"))
        let digits = Array("0123456789ABCDEF".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(large.count * 2 + 1)
        for byte in large { hex += [digits[Int(byte >> 4)], digits[Int(byte & 15)]] }
        let expectedHex = String(decoding: hex + [10], as: UTF8.self)
        XCTAssertTrue(found.stdout == expectedHex, "the hex is the secret's")

        XCTAssertEqual(try cli.run("add-generic-password", "-a", "c1", "-s", "c1", "-w", "a\u{9B}31mb").status, 0)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "c1", "-w").stdout, "61C29B33316D62\n")
        let shown = try cli.run("find-generic-password", "-s", "c1", "-g")
        XCTAssertEqual(shown.stderr, "password: 0x61C29B33316D62  \"a\\302\\23331mb\"\n")
    }

    /// Passcodes given with -p and -o kept only their text: every byte that is not UTF-8 became U+FFFD,
    /// so \xff\xff opened a keychain locked with \xfe\xfe.
    func testPasscodeArgumentsKeepTheirBytes() throws {
        func run(_ script: String, _ arguments: String...) throws -> CommandResult {
            try cli.run(program: "/bin/sh", ["-c", script, cli.executable] + arguments)
        }
        XCTAssertEqual(try run("exec \"$0\" set-keychain-password -p \"$(printf '\\377\\377')\"").status, 0)
        XCTAssertEqual(try run("exec \"$0\" unlock-keychain -p \"$(printf '\\376\\376')\"").status, 51)
        XCTAssertEqual(
            try run("exec \"$0\" unlock-keychain -p \"$(printf '\\357\\277\\275\\357\\277\\275')\"").status, 51)
        XCTAssertEqual(try run("exec \"$0\" unlock-keychain -p \"$(printf '\\377\\377')\"").status, 0)
    }

    /// --json printed attributes with C1 control characters raw (U+009B is a terminal's CSI).
    func testJSONEscapesC1ControlCharacters() throws {
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "a", "-s", "c1\u{9B}2J", "-w", "x").status, 0)
        let found = try cli.run("find-generic-password", "-a", "a", "--json")
        XCTAssertEqual(found.status, 0)
        XCTAssertFalse(found.stdout.unicodeScalars.contains { (0x80...0x9f).contains($0.value) }, found.stdout)
        XCTAssertTrue(found.stdout.contains("c1\\u009b2J"), found.stdout)
        let object = try JSONSerialization.jsonObject(with: Data(found.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(object?["svce"] as? String, "c1\u{9B}2J", "still the same JSON value")
    }

    /// A password on standard input was read without a limit (`< /dev/zero` grew until memory ran out).
    func testPasswordOnStandardInputHasALimit() throws {
        let result = try cli.run(
            program: "/bin/sh",
            ["-c", "head -c 67108865 /dev/zero | \"$0\" add-generic-password -a a -s huge -w", cli.executable])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("larger than 64 MiB"), result.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "huge").status, 44, "nothing stored")
    }

    /// A read error on standard input was taken for its end: a directory as input stored an empty
    /// password, and a failure part-way would have stored part of one.
    func testAnUnreadablePasswordIsNotStored() throws {
        let result = try cli.run(
            program: "/bin/sh", ["-c", "exec \"$0\" add-generic-password -a a -s fromdir -w < /", cli.executable])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("cannot read the password"), result.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-s", "fromdir").status, 44)
    }

    /// KEYCHAIN_HOME with bytes that are not UTF-8 was repaired into another path, so different byte
    /// strings named one keychain.
    func testAHomeThatIsNotUTF8IsRefused() throws {
        let result = try cli.run(
            program: "/bin/sh",
            ["-c", "KEYCHAIN_HOME=\"$1$(printf '\\377')\" exec \"$0\" show-keychain-info", cli.executable, cli.home])
        XCTAssertEqual(result.status, 53, result.stderr)
        XCTAssertTrue(result.stderr.contains("KEYCHAIN_HOME is not valid UTF-8"), result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cli.home + "\u{FFFD}"))
    }
}
