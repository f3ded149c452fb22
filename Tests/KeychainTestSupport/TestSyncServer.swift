import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A `keychain-syncd` of its own on a database of a `TestPostgres`, listening on a Unix socket in a
/// temporary directory; run as nobody when the tests run as root (a server needs no privilege), and
/// stopped when released.
public final class TestSyncServer: @unchecked Sendable {
    public let directory: String
    public let socket: String
    public let logPath: String
    private let process = Process()

    /// The built `keychain-syncd`, beside the test bundle.
    public static var binary: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("keychain-syncd").path
    }

    /// - Parameters:
    ///   - listen: an address other than the socket in its directory (a `tls://127.0.0.1:PORT`).
    ///   - arguments: more arguments (`--tls-certificate`, `--tls-key`), given the server's directory.
    ///   - prepare: runs on the directory before the server starts (files it reads go there).
    ///   - user: the user it runs as when the tests run as root (nobody by default).
    ///   - privileges: more `setpriv` options (a unit's capabilities, `--no-new-privs`), as root.
    ///   - launcher: a command the server runs under (an address-family sandbox).
    public init(
        database: String, listen: String? = nil, arguments: (String) -> [String] = { _ in [] },
        prepare: (String) throws -> Void = { _ in }, user: uid_t = 65534, privileges: [String] = [],
        launcher: [String] = []
    ) throws {
        directory = NSTemporaryDirectory() + "syncd-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        let user: uid_t? = getuid() == 0 ? user : nil
        if let user { chown(directory, user, user) }
        socket = listen ?? directory + "/sync.sock"
        logPath = directory + "/log"
        try prepare(directory)
        var command = [Self.binary, "--database", database, "--listen", socket] + arguments(directory)
        if let user {
            command =
                [
                    "/usr/bin/setpriv", "--reuid", "\(user)", "--regid", "\(user)", "--clear-groups", "--pdeathsig",
                    "TERM",
                ] + privileges + command
        }
        command = launcher + command
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while !(listen == nil ? FileManager.default.fileExists(atPath: socket) : Self.accepts(socket)) {
            guard Date() < deadline, process.isRunning else {
                throw TestDaemon.Failure(description: "keychain-syncd did not start: \(log())")
            }
            usleep(20_000)
        }
    }

    /// Whether something accepts TCP connections at `tls://HOST:PORT`.
    private static func accepts(_ address: String) -> Bool {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            return false
        }
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = port.bigEndian
        target.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// The server's process id (the launcher's, which execs it).
    public var processIdentifier: Int32 { process.processIdentifier }

    public func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
