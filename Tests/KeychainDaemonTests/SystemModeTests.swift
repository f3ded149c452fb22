import Foundation
import KeychainCore
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A system daemon: one keychain per client uid, in a directory no client can read, and a registry a
/// user's own processes cannot change without the keychain's passcode.
final class SystemModeTests: XCTestCase {
    func testEachUserHasAKeychainOfTheirOwnThatOnlyTheDaemonReads() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system"])
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        let security = ClientPrograms.built("security")
        let nobody: uid_t = 65534

        // Root registers the app in root's keychain and stores a secret.
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "root", "root-secret"], daemon: daemon).output, "status 0")

        // The same executable run by another user is not registered in that user's keychain.
        XCTAssertEqual(
            try ClientPrograms.run(app, ["count", "web"], daemon: daemon, user: nobody).output, "status -34018")
        // That user cannot register it without a passcode, nor with a wrong one.
        let register = ["app", "register", app, "--application-identifier", "TEAM.a", "--access-group", "TEAM.a"]
        var result = try ClientPrograms.run(security, register, daemon: daemon, user: nobody)
        XCTAssertNotEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("set one first"), result.output)
        result = try ClientPrograms.run(
            security, ["set-keychain-password", "-p", "8642"], daemon: daemon, user: nobody)
        XCTAssertEqual(result.status, 0, result.output)
        result = try ClientPrograms.run(security, register + ["-p", "0000"], daemon: daemon, user: nobody)
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: -25293) & 0xff), result.output)
        // A registry passcode guess is counted as an unlock's is.
        result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: daemon, user: nobody)
        XCTAssertTrue(result.output.contains("failed attempts: 1"), result.output)
        result = try ClientPrograms.run(security, register + ["-p", "8642"], daemon: daemon, user: nobody)
        XCTAssertEqual(result.status, 0, result.output)

        // Now registered for that user: their keychain, without root's items.
        XCTAssertEqual(try ClientPrograms.run(app, ["count", "web"], daemon: daemon, user: nobody).output, "count 0")
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "nobody", "n-secret"], daemon: daemon, user: nobody).output,
            "status 0")
        XCTAssertEqual(try ClientPrograms.run(app, ["count", "web"], daemon: daemon).output, "count 1")
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "root"], daemon: daemon).output, "root-secret")
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "root"], daemon: daemon, user: nobody).output, "status -25300")

        // Lock state is per user too: root's lock does not lock nobody's keychain, and the other way.
        result = try ClientPrograms.run(security, ["lock-keychain"], daemon: daemon, user: nobody)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "root"], daemon: daemon).output, "root-secret")

        // The files: each user's keychain in a directory of its own, none of it reachable by the user.
        let users = daemon.home + "/users"
        for uid in ["0", "65534"] {
            var info = stat()
            XCTAssertEqual(stat(users + "/" + uid, &info), 0)
            XCTAssertEqual(info.st_mode & 0o777, 0o700)
            XCTAssertEqual(info.st_uid, getuid(), "owned by the daemon's user, not the client")
            XCTAssertTrue(FileManager.default.fileExists(atPath: users + "/" + uid + "/device-root"))
        }
        result = try ClientPrograms.run("/bin/cat", [users + "/65534/device-root"], daemon: nil, user: nobody)
        XCTAssertNotEqual(result.status, 0, "the user reads the device root of their own keychain")
        XCTAssertTrue(result.output.contains("Permission denied"), result.output)

        // Removing the passcode does not open the registry to whoever sets the next one: on a keychain
        // holding items and apps, a first passcode cannot be set by the user.
        result = try ClientPrograms.run(
            security, ["set-keychain-password", "-o", "8642", "-p", "", "-y"], daemon: daemon, user: nobody)
        XCTAssertEqual(result.status, 0, result.output)
        result = try ClientPrograms.run(
            security, ["set-keychain-password", "-p", "attacker"], daemon: daemon, user: nobody)
        XCTAssertNotEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("only on an empty keychain"), result.output)
        result = try ClientPrograms.run(security, register + ["-p", "attacker"], daemon: daemon, user: nobody)
        XCTAssertNotEqual(result.status, 0, result.output)
    }

    func testTheDaemonNeverChangesADirectoryItDidNotMake() throws {
        let shared = NSTemporaryDirectory() + "shared-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        chmod(shared, 0o1777)
        for mode in [["--system"], []] {
            let result = try ClientPrograms.run(
                TestDaemon.binary, mode + ["--home", shared + "/home", "--socket", shared + "/securityd.sock"],
                daemon: nil)
            XCTAssertEqual(result.status, 1, result.output)
            XCTAssertTrue(result.output.contains("no one else can write to"), result.output)
            var info = stat()
            XCTAssertEqual(stat(shared, &info), 0)
            XCTAssertEqual(info.st_mode & 0o7777, 0o1777, "the shared directory was changed")
        }
    }
}
