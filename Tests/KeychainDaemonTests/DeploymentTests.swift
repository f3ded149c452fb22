import Foundation
import KeychainClient
import KeychainCore
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// How the daemon is deployed: socket activation, and the systemd units the repository ships.
final class DeploymentTests: XCTestCase {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    func testSocketActivationServesOnTheSocketSystemdPasses() throws {
        let activator = "/usr/bin/systemd-socket-activate"
        guard FileManager.default.isExecutableFile(atPath: activator) else {
            throw XCTSkip("systemd-socket-activate is not installed")
        }
        let directory = NSTemporaryDirectory() + "securityd-activate-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/securityd.sock"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: activator)
        process.arguments = ["-l", socket, TestDaemon.binary, "--home", directory + "/home", "--exit-with-parent"]
        let log = Pipe()
        process.standardError = log
        process.standardOutput = log
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        // The activator listens at once; the daemon starts on the first connection and answers it.
        let deadline = Date().addingTimeInterval(10)
        var status: KeybagStatus?
        while status == nil, Date() < deadline {
            status = try? DaemonKeychainService(socketPath: socket).status()
            if status == nil { usleep(50_000) }
        }
        XCTAssertEqual(status?.lockState, .noPasscode)
        process.terminate()
        process.waitUntilExit()
        let text = String(decoding: log.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(text.contains("using the socket systemd passed"), text)
    }

    func testTheSystemdUnitsAreValid() throws {
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else {
            throw XCTSkip("systemd-analyze is not installed")
        }
        let directory = NSTemporaryDirectory() + "securityd-units-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let units = Self.repository.appendingPathComponent("systemd")
        for name in ["securityd.service", "securityd.socket", "securityd-system.service"] {
            // The installed path of the binary is not here: point ExecStart at the built one.
            let text = try String(contentsOf: units.appendingPathComponent(name), encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin/securityd", with: TestDaemon.binary)
            try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
        }
        for name in ["securityd.service", "securityd-system.service"] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: analyze)
            process.arguments = ["verify", "--man=no", directory + "/" + name]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            // Users and unknown-unit warnings about the host are not the unit's fault.
            let problems = text.split(separator: "\n").filter {
                !$0.contains("securityd.socket") && !$0.contains("User") && !$0.isEmpty
            }
            XCTAssertEqual(problems, [], "\(name): \(text)")
        }
    }
}
