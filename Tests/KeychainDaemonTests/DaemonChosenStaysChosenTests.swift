import Foundation
import KeychainCore
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A daemon found at the default socket stays this process's service: when it stops and its socket is
/// removed, the next call is errSecNotAvailable, never a silent switch to a keychain of the process's own.
final class DaemonChosenStaysChosenTests: XCTestCase {
    func testADaemonFoundAtTheDefaultSocketIsNotAbandonedForTheFilesWhenItGoesAway() throws {
        guard !FileManager.default.fileExists(atPath: KeychainLocations.systemSocket) else {
            throw XCTSkip("a system daemon listens on this machine: it would be chosen first")
        }
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        XCTAssertEqual(try ClientPrograms.run(app, ["put", "web", "user", "kept"], daemon: daemon).output, "status 0")

        // The user's runtime directory, whose keychain/securityd.sock is the daemon's socket.
        let runtime = programs.directory + "/runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        chmod(runtime, 0o700)
        try FileManager.default.createSymbolicLink(
            atPath: runtime + "/keychain", withDestinationPath: (daemon.socket as NSString).deletingLastPathComponent)
        let home = NSTemporaryDirectory() + "embedded-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: home) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: app)
        process.arguments = ["read-twice", "web", "user", "2500"]
        var environment = ProcessInfo.processInfo.environment
        environment["KEYCHAIN_SOCKET"] = nil  // the default places: the system socket, then the user's
        environment["XDG_RUNTIME_DIR"] = runtime
        environment["KEYCHAIN_HOME"] = home
        environment["KEYCHAIN_LOG"] = "off"
        environment["KEYCHAIN_ACCESS_GROUPS"] = nil
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // After the first read (the app's start and one lookup take milliseconds), the daemon goes, and
        // its socket with it, as a daemon stopped outside socket activation leaves none.
        usleep(800_000)
        daemon.stop()
        try? FileManager.default.removeItem(atPath: daemon.socket)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(text.split(separator: "\n"), ["kept", "status -25291"], text)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home), "the app opened a keychain of its own")
    }
}
