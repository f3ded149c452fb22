import Foundation
import KeychainTestSupport
import XCTest

/// After a lock, the daemon's memory holds neither the passcode nor a class-A secret it served.
final class DaemonMemoryAfterLockTests: XCTestCase {
    func testNoPasscodeOrClassASecretIsInTheDaemonsMemoryAfterALock() throws {
        guard getuid() == 0 else { throw XCTSkip("reading the daemon's memory needs root") }
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("memory-app")
        try daemon.register(executable: app, identifier: "TEAM.m", groups: ["TEAM.m"])
        let passcode = "pc-" + UUID().uuidString
        let secret = "class-a-" + UUID().uuidString
        let security = ClientPrograms.built("security")
        XCTAssertEqual(
            try ClientPrograms.run(security, ["set-keychain-password", "-p", passcode], daemon: daemon).status, 0)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "vault", "me", secret, "", "ak"], daemon: daemon).output, "status 0")
        for _ in 0..<5 {
            XCTAssertEqual(try ClientPrograms.run(app, ["read", "vault", "me"], daemon: daemon).output, secret)
        }
        XCTAssertEqual(try ClientPrograms.run(security, ["lock-keychain"], daemon: daemon).status, 0)
        XCTAssertEqual(try ClientPrograms.run(security, ["unlock-keychain", "-p", passcode], daemon: daemon).status, 0)
        XCTAssertEqual(try ClientPrograms.run(security, ["lock-keychain"], daemon: daemon).status, 0)
        let pid = daemon.process.processIdentifier
        // The search works: the daemon's socket path, which it keeps, is found.
        XCTAssertGreaterThan(ProcessMemory.occurrences(of: Array(daemon.socket.utf8), in: pid) ?? 0, 0)
        // The last 24 bytes of each: a freed buffer keeps all but its first 16 (the allocator's links),
        // so a whole-string search would miss the copies freed without a wipe.
        XCTAssertEqual(
            ProcessMemory.occurrences(of: Array(passcode.utf8.suffix(24)), in: pid), 0, "the passcode is in memory")
        XCTAssertEqual(
            ProcessMemory.occurrences(of: Array(secret.utf8.suffix(24)), in: pid), 0, "a class-A secret is in memory")
    }
}
