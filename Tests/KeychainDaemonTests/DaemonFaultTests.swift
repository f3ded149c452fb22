import Foundation
import KeychainCore
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon killed, stopped, or gone, with clients in the middle of their work.
final class DaemonFaultTests: XCTestCase {
    /// Starts `app add <prefix> <large count>` and returns it with the highest index it has seen
    /// acknowledged once `atLeast` adds were.
    private func startAdding(_ app: String, prefix: String, daemon: TestDaemon) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: app)
        process.arguments = ["add", prefix, "100000"]
        var environment = ProcessInfo.processInfo.environment
        environment["KEYCHAIN_SOCKET"] = daemon.socket
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, output)
    }

    /// Reads "added <n>" lines until at least `count` adds were acknowledged, then returns the last index.
    private func waitForAcknowledgements(_ output: Pipe, count: Int) -> Int {
        var text = ""
        var last = -1
        while last + 1 < count {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
            for line in text.split(separator: "\n") where line.hasPrefix("added ") {
                last = max(last, Int(line.dropFirst(6)) ?? last)
            }
        }
        return last
    }

    /// The rest of what the writer printed, and the last acknowledged index in it.
    private func drain(_ output: Pipe, after last: Int) -> Int {
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return text.split(separator: "\n").filter { $0.hasPrefix("added ") }.compactMap { Int($0.dropFirst(6)) }.max()
            ?? last
    }

    func testSIGKILLDuringAStreamOfAcknowledgedAddsLosesNoneOfThem() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("writer")
        try daemon.register(executable: app, identifier: "TEAM.w", groups: ["TEAM.w"])
        let (writer, output) = try startAdding(app, prefix: "stream", daemon: daemon)
        let seen = waitForAcknowledgements(output, count: 300)
        daemon.kill()
        let acknowledged = drain(output, after: seen)
        writer.waitUntilExit()
        XCTAssertNotEqual(writer.terminationStatus, 0, "the writer saw the daemon go")
        XCTAssertGreaterThanOrEqual(acknowledged, 299)

        try daemon.start()
        let count = try ClientPrograms.run(app, ["count", "stream"], daemon: daemon).output
        let stored = Int(count.dropFirst("count ".count)) ?? -1
        // Every acknowledged add is there; at most the one in flight besides.
        XCTAssertGreaterThanOrEqual(stored, acknowledged + 1, count)
        XCTAssertLessThanOrEqual(stored, acknowledged + 2, count)
        for index in [0, acknowledged / 2, acknowledged] {
            XCTAssertEqual(
                try ClientPrograms.run(app, ["read", "stream", "account-\(index)"], daemon: daemon).output,
                "secret-stream-\(index)")
        }
        // The database takes writes again.
        XCTAssertEqual(try ClientPrograms.run(app, ["put", "after", "a", "v"], daemon: daemon).output, "status 0")
    }

    func testSIGTERMFinishesTheRequestsInProgressAndStopsCleanly() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("writer")
        try daemon.register(executable: app, identifier: "TEAM.w", groups: ["TEAM.w"])
        let writers = try (0..<4).map { try startAdding(app, prefix: "term\($0)", daemon: daemon) }
        let seen = writers.map { waitForAcknowledgements($0.1, count: 50) }
        daemon.stop()
        XCTAssertEqual(daemon.process.terminationStatus, 0, daemon.log)
        XCTAssertTrue(daemon.log.contains("stopped"), daemon.log)
        var acknowledged: [Int] = []
        for ((process, output), last) in zip(writers, seen) {
            acknowledged.append(drain(output, after: last))
            process.waitUntilExit()
        }
        // The socket stays: a client keeps seeing a daemon that is not running, not the files.
        XCTAssertTrue(FileManager.default.fileExists(atPath: daemon.socket))
        try daemon.start()
        for (index, last) in acknowledged.enumerated() {
            let count = try ClientPrograms.run(app, ["count", "term\(index)"], daemon: daemon).output
            let stored = Int(count.dropFirst("count ".count)) ?? -1
            XCTAssertGreaterThanOrEqual(stored, last + 1, count)
        }
    }

    func testAClientWhoseDaemonIsGoneGetsNotAvailableWithinASecondAndNeverOpensTheFiles() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        // A connection kept open in this process, and a daemon that goes away.
        let service = daemon.service()
        _ = try service.status()
        daemon.kill()
        var started = Date()
        XCTAssertThrowsError(try service.status()) { XCTAssertEqual(($0 as? KeychainError)?.code, .notAvailable) }
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)

        let home = NSTemporaryDirectory() + "embedded-" + UUID().uuidString
        started = Date()
        let result = try ClientPrograms.run(
            app, ["read", "x", "y"], daemon: daemon, environment: ["KEYCHAIN_HOME": home])
        XCTAssertEqual(result.output, "status -25291")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home), "the client opened a keychain of its own")

        // A daemon back on the same socket: the same service reconnects.
        try daemon.start()
        XCTAssertEqual(try service.status().lockState, .noPasscode)
    }
}
