import Foundation
import KeychainTestSupport
import XCTest

/// A secret crosses the daemon in frames and in the engine's buffers; once the request that carried
/// it is answered, no copy is left in the daemon's memory (whoever reads that memory later — root, a
/// core file, swap — finds none), though the keychain stays unlocked and the item stored.
final class DaemonMemoryAfterAnswerTests: XCTestCase {
    func testNoSecretIsInTheDaemonsMemoryAfterItsRequestsAreAnswered() throws {
        guard getuid() == 0 else { throw XCTSkip("reading the daemon's memory needs root") }
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("answer-memory-app")
        try daemon.register(executable: app, identifier: "TEAM.m", groups: ["TEAM.m"])
        let written = "written-" + UUID().uuidString
        let updated = "updated-" + UUID().uuidString
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "vault", "me", written, "", "ak"], daemon: daemon).output, "status 0")
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "vault", "me"], daemon: daemon).output, written)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["update", "vault", "me", updated], daemon: daemon).output, "status 0")
        for _ in 0..<3 {
            XCTAssertEqual(try ClientPrograms.run(app, ["read", "vault", "me"], daemon: daemon).output, updated)
        }
        let pid = daemon.process.processIdentifier
        // The search works: the daemon's socket path, which it keeps, is found.
        XCTAssertGreaterThan(ProcessMemory.occurrences(of: Array(daemon.socket.utf8), in: pid) ?? 0, 0)
        // Each secret's last 24 bytes: a freed buffer keeps all but its first 16 (the allocator's links).
        for secret in [written, updated] {
            XCTAssertEqual(
                ProcessMemory.occurrences(of: Array(secret.utf8.suffix(24)), in: pid), 0,
                "\(secret.prefix(7)) is in memory")
        }
    }
}
