import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import XCTest

/// Memory for large frames is reserved per uid: other users announcing large frames on every
/// connection they may open cannot make a registered app's large request fail.
final class FrameBudgetTests: XCTestCase {
    func testOtherUsersHoldingLargeFramesDoNotStarveARegisteredApp() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system"])
        let programs = try ClientPrograms()
        let app = try programs.app("large-writer")
        let holder = try programs.app("frame-holder")
        try daemon.register(executable: app, identifier: "TEAM.large", groups: ["TEAM.large"])
        var holders: [Process] = []
        defer {
            for process in holders where process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
        }
        // Three users, 128 connections each (the per-uid limit), each announcing a large frame and
        // sending nothing more: two with 1 MiB frames, the third with smaller ones that fill what is
        // left, more than one budget shared by everyone could hold.
        for (user, size) in [(65534, 1 << 20), (4242, 1 << 20), (4241, 50_000)] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = [
                "--reuid", "\(user)", "--regid", "\(user)", "--clear-groups", holder, "hold-frames", daemon.socket,
                "128", "\(size)",
            ]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            holders.append(process)
            let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            XCTAssertEqual(line.trimmingCharacters(in: .whitespacesAndNewlines), "holding 128")
        }
        // Give the daemon time to identify every connection and read its header.
        sleep(2)
        let secret = String(repeating: "s", count: 60_000)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "large", secret], daemon: daemon).output, "status 0", daemon.log)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "large"], daemon: daemon).output, secret)
    }
}
