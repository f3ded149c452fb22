import Foundation
import XCTest

/// scripts/install-securityd, run into a staging directory (DESTDIR) with stand-in binaries.
final class InstallScriptTests: XCTestCase {
    private var cli: CommandRunner!
    private var scratch: String!

    override func setUpWithError() throws {
        cli = CommandRunner()
        scratch = NSTemporaryDirectory() + "install-securityd-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch + "/bin", withIntermediateDirectories: true)
        // A systemctl that records any call, first on PATH: installing must start and enable nothing.
        try write(
            "#!/bin/sh\necho \"$@\" >>\(scratch!)/systemctl-calls\n", to: scratch + "/path/systemctl", mode: 0o755)
        cli.extraEnvironment["PATH"] =
            scratch + "/path:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        for binary in ["security", "security-full", "securityd"] {
            // Mode 0700: the installed copy must still be 0755.
            try write("#!/bin/sh\necho stand-in \(binary)\n", to: scratch + "/bin/" + binary, mode: 0o700)
        }
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: scratch)
        cli = nil
    }

    private func write(_ text: String, to path: String, mode: Int) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    private static let script = SecurityCommandTests.packageRoot + "/scripts/install-securityd"

    private func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    private func execStart(_ unit: String) throws -> [String] {
        try String(contentsOfFile: unit, encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }
            .map { String($0.dropFirst("ExecStart=".count)) }
    }

    func testInstallsBinariesAndUnitsUnderDestdir() throws {
        let destdir = scratch + "/stage"
        cli.extraEnvironment["DESTDIR"] = destdir
        let result = try cli.run(program: "/bin/bash", [Self.script, "--from", scratch + "/bin"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let repository = SecurityCommandTests.packageRoot + "/systemd/"
        let expected: [(String, Int, String?)] = [
            ("/usr/local/bin/security", 0o755, nil), ("/usr/local/bin/security-full", 0o755, nil),
            ("/usr/local/bin/securityd", 0o755, nil),
            ("/etc/systemd/system/securityd-system.service", 0o644, "securityd-system.service"),
            ("/usr/lib/sysusers.d/securityd.conf", 0o644, "securityd.sysusers.conf"),
            ("/usr/lib/systemd/user/securityd.service", 0o644, "securityd.service"),
            ("/usr/lib/systemd/user/securityd.socket", 0o644, "securityd.socket"),
            (
                "/usr/local/share/dbus-1/services/org.freedesktop.secrets.service", 0o644,
                "org.freedesktop.secrets.service"
            ),
            ("/usr/share/xdg-desktop-portal/portals/swift-keychain.portal", 0o644, "swift-keychain.portal"),
        ]
        for (path, wanted, source) in expected {
            XCTAssertEqual(try mode(destdir + path), wanted, path)
            if let source {
                // With the default prefix the units are the repository's, byte for byte.
                XCTAssertEqual(
                    try Data(contentsOf: URL(fileURLWithPath: destdir + path)),
                    try Data(contentsOf: URL(fileURLWithPath: repository + source)), path)
            }
        }
        XCTAssertEqual(
            try String(contentsOfFile: destdir + "/usr/local/bin/securityd", encoding: .utf8),
            "#!/bin/sh\necho stand-in securityd\n")
        for unit in ["/etc/systemd/system/securityd-system.service", "/usr/lib/systemd/user/securityd.service"] {
            let lines = try execStart(destdir + unit)
            XCTAssertEqual(lines.count, 1, unit)
            XCTAssertTrue(lines.first?.hasPrefix("/usr/local/bin/securityd ") ?? false, "\(unit): \(lines)")
        }
        // Those files and no others (no leftover temporary copies).
        var files = Set<String>()
        for case let path as String in FileManager.default.enumerator(atPath: destdir) ?? .init() {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: destdir + "/" + path, isDirectory: &isDirectory),
                !isDirectory.boolValue
            {
                files.insert("/" + path)
            }
        }
        XCTAssertEqual(files, Set(expected.map(\.0)))
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch + "/systemctl-calls"), "systemctl was run")
    }

    func testAnotherPrefixIsWrittenIntoExecStart() throws {
        let destdir = scratch + "/stage"
        cli.extraEnvironment["DESTDIR"] = destdir
        cli.extraEnvironment["PREFIX"] = "/opt/keychain"
        let result = try cli.run(program: "/bin/bash", [Self.script, "--from", scratch + "/bin"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try mode(destdir + "/opt/keychain/bin/securityd"), 0o755)
        XCTAssertFalse(FileManager.default.fileExists(atPath: destdir + "/usr/local/bin/securityd"))
        // The activation file goes under the prefix, and starts the daemon installed there.
        let activation = try String(
            contentsOfFile: destdir + "/opt/keychain/share/dbus-1/services/org.freedesktop.secrets.service",
            encoding: .utf8)
        XCTAssertTrue(activation.contains("\nExec=/opt/keychain/bin/securityd --secret-service\n"), activation)
        let lines = try execStart(destdir + "/usr/lib/systemd/user/securityd.service")
        // The repository's line with the other prefix, whatever options the unit gives.
        let original = try execStart(SecurityCommandTests.packageRoot + "/systemd/securityd.service")
        XCTAssertEqual(original.count, 1)
        XCTAssertTrue(original.first?.hasPrefix("/usr/local/bin/securityd") ?? false, "\(original)")
        XCTAssertEqual(
            lines,
            original.map {
                $0.replacingOccurrences(of: "/usr/local/bin/securityd", with: "/opt/keychain/bin/securityd")
            })
    }

    func testMissingBinariesFailClearlyAndInstallNothing() throws {
        let destdir = scratch + "/stage"
        cli.extraEnvironment["DESTDIR"] = destdir
        try FileManager.default.removeItem(atPath: scratch + "/bin/securityd")
        let result = try cli.run(program: "/bin/bash", [Self.script, "--from", scratch + "/bin"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("no securityd in \(scratch!)/bin"), result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: destdir))

        // Without --from: the checkout's .build/release, here a copy of the script with no build beside it.
        let checkout = scratch + "/checkout"
        try FileManager.default.createDirectory(atPath: checkout + "/scripts", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.script, toPath: checkout + "/scripts/install-securityd")
        try FileManager.default.copyItem(
            atPath: SecurityCommandTests.packageRoot + "/systemd", toPath: checkout + "/systemd")
        let bare = try cli.run(program: "/bin/bash", [checkout + "/scripts/install-securityd"])
        XCTAssertEqual(bare.status, 1)
        XCTAssertTrue(
            bare.stderr.contains("no security security-full securityd in \(checkout)/.build/release: build them"),
            bare.stderr)
        XCTAssertTrue(bare.stderr.contains("--build"), bare.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: destdir))
    }

    func testUnknownArgumentsAndBadPrefixesAreRefused() throws {
        cli.extraEnvironment["DESTDIR"] = scratch + "/stage"
        let unknown = try cli.run(program: "/bin/bash", [Self.script, "--start"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("unknown argument --start"), unknown.stderr)
        let both = try cli.run(program: "/bin/bash", [Self.script, "--build", "--from", scratch + "/bin"])
        XCTAssertEqual(both.status, 2, "--build with --from must not start a build")
        for prefix in ["relative/dir", "/opt/a b", "/opt/a|b"] {
            cli.extraEnvironment["PREFIX"] = prefix
            let result = try cli.run(program: "/bin/bash", [Self.script, "--from", scratch + "/bin"])
            XCTAssertEqual(result.status, 2, prefix)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch + "/stage"))
        XCTAssertEqual(try cli.run(program: "/bin/bash", ["-n", Self.script]).status, 0)
    }
}
