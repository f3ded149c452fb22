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

    func testAStoppedSocketActivatedDaemonLeavesTheSocketListeningForItsNextStart() throws {
        let directory = NSTemporaryDirectory() + "securityd-reactivate-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/securityd.sock"
        // This test plays systemd: it listens, and hands the socket to each daemon it starts.
        let listener = try listeningUnixSocket(at: path)
        defer { close(listener) }
        let log = directory + "/securityd.log"
        let logText = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

        var daemon = try Self.spawnActivated(listener: listener, home: directory + "/home", log: log)
        XCTAssertEqual(try Self.waitForStatus(path)?.lockState, .noPasscode, logText())
        XCTAssertEqual(Self.stop(daemon), 0, logText())
        XCTAssertTrue(logText().contains("using the socket systemd passed"), logText())

        // Stopped, the daemon left the socket as systemd holds it: a client connecting now is queued…
        let queued = try RawConnection(path)
        // …and served by the next daemon systemd starts on that traffic.
        daemon = try Self.spawnActivated(listener: listener, home: directory + "/home", log: log)
        defer { _ = Self.stop(daemon) }
        queued.send(Data(repeating: 0xff, count: 64))
        XCTAssertNotNil(queued.readUntilClosed(), "the queued connection was never served: \(logText())")
        XCTAssertEqual(try Self.waitForStatus(path)?.lockState, .noPasscode, logText())
    }

    /// Starts the daemon the way systemd does on socket activation: the socket as descriptor 3, and
    /// LISTEN_PID naming the daemon's own pid (set by a shell that then runs the daemon in its place).
    private static func spawnActivated(listener: Int32, home: String, log: String) throws -> pid_t {
        let output = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw TestDaemon.Failure(description: "cannot open \(log)") }
        defer { close(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, listener, 3)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, output, 2)
        let arguments = [
            "/bin/sh", "-c", "LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\"", TestDaemon.binary, "--home", home,
            "--exit-with-parent",
        ]
        var argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var environment =
            ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("KEYCHAIN_") }
            .map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { environment.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, "/bin/sh", &actions, nil, &argv, &environment)
        guard result == 0 else { throw TestDaemon.Failure(description: "cannot start the daemon: \(result)") }
        return pid
    }

    private static func waitForStatus(_ path: String) throws -> KeybagStatus? {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let status = try? DaemonKeychainService(socketPath: path).status() { return status }
            usleep(50_000)
        }
        return nil
    }

    /// SIGTERM, then the exit status (or 128 + the signal).
    private static func stop(_ pid: pid_t) -> Int32 {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
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
