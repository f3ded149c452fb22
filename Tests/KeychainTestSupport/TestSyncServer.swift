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

    public init(database: String) throws {
        directory = NSTemporaryDirectory() + "syncd-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        let user: uid_t? = getuid() == 0 ? 65534 : nil
        if let user { chown(directory, user, user) }
        socket = directory + "/sync.sock"
        logPath = directory + "/log"
        var command = [Self.binary, "--database", database, "--listen", socket]
        if let user {
            command =
                [
                    "/usr/bin/setpriv", "--reuid", "\(user)", "--regid", "\(user)", "--clear-groups", "--pdeathsig",
                    "TERM",
                ] + command
        }
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline, process.isRunning else {
                throw TestDaemon.Failure(description: "keychain-syncd did not start: \(log())")
            }
            usleep(20_000)
        }
    }

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
