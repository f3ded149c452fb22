import Foundation
import KeychainClient
import KeychainCore

#if canImport(Glibc)
    import Glibc
#endif

/// A `securityd` of its own for one test: a temporary keychain directory and socket, started on
/// creation, stopped (SIGTERM) and removed when released.
public final class TestDaemon {
    public let directory: String
    public let home: String
    public let socket: String
    public let logPath: String
    public private(set) var process: Process
    private let arguments: [String]
    private let environment: [String: String]
    /// The uid the daemon runs as (through setpriv); nil: this process's.
    public let user: uid_t?
    /// More `setpriv` options for a daemon run as `user` (capabilities, `--no-new-privs`), and a
    /// command the whole start runs under (a sandbox), so that a test can start it as a unit would.
    private let privileges: [String]
    private let launcher: [String]

    /// The built `securityd`, beside the test bundle.
    public static var binary: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("securityd").path
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) { self.description = description }
    }

    /// Starts a daemon with `arguments` (after `--socket`); waits until it accepts connections. `user`
    /// runs it as that uid (this process must be root), its directory then that user's.
    public init(
        arguments: [String] = [], environment: [String: String] = [:], home: String? = nil, user: uid_t? = nil,
        privileges: [String] = [], launcher: [String] = []
    ) throws {
        self.privileges = privileges
        self.launcher = launcher
        directory = NSTemporaryDirectory() + "securityd-test-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        self.user = user
        if let user, chown(directory, user, user) != 0 {
            throw Failure(description: "cannot give \(directory) to uid \(user) (errno \(errno))")
        }
        self.home = home ?? directory + "/home"
        socket = directory + "/run/securityd.sock"
        logPath = directory + "/securityd.log"
        self.arguments = arguments
        self.environment = environment
        process = Process()
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts the daemon again after `stop` or `kill` (a restart: the keychain is before first unlock).
    public func start() throws {
        let process = Process()
        let daemonArguments =
            ["--socket", socket, "--exit-with-parent"] + (arguments.contains("--home") ? [] : ["--home", home])
            + arguments
        var command = [Self.binary] + daemonArguments
        if let user {
            command =
                ["/usr/bin/setpriv", "--reuid", "\(user)", "--regid", "\(user)", "--clear-groups"] + privileges
                + command
        }
        command = launcher + command
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        var variables = ProcessInfo.processInfo.environment
        variables["KEYCHAIN_SOCKET"] = nil
        variables["KEYCHAIN_HOME"] = nil
        variables["KEYCHAIN_DEVICE_ROOT"] = nil
        variables.merge(environment) { $1 }
        process.environment = variables
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            if let user { _ = chown(logPath, user, user) }
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if !process.isRunning { throw Failure(description: "securityd ended at start: \(self.log)") }
            if user == nil ? Self.accepts(socket) : Self.listens(socket) { return }
            usleep(10_000)
        }
        throw Failure(description: "securityd did not listen within 10 s: \(self.log)")
    }

    /// SIGTERM, then waits for the daemon to end.
    public func stop() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }

    /// SIGKILL, then waits.
    public func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    public var log: String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    /// A client of this daemon, as this (test) process.
    public func service() -> DaemonKeychainService { DaemonKeychainService(socketPath: socket) }

    /// Registers `executable` (this test process by default) with `groups`.
    public func register(
        executable: String = TestDaemon.ownExecutable, identifier: String = "TEAM.test", groups: [String],
        development: Bool = false
    ) throws {
        try service().registerApp(
            AppRegistrationRequest(
                executablePath: executable, applicationIdentifier: identifier, accessGroups: groups,
                trustPathOnly: development, passcode: nil))
    }

    public static var ownExecutable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    }

    private static func accepts(_ path: String) -> Bool {
        (try? DaemonKeychainService(socketPath: path).perform(.status)) != nil
    }

    /// Whether something listens at `path` (a daemon of another user would refuse this process's
    /// requests, so only the connection is tried).
    private static func listens(_ path: String) -> Bool {
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        } == 0
    }
}
