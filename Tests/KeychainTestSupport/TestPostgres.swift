import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A PostgreSQL server of its own: a cluster made by `initdb` in a temporary directory, listening only
/// on a Unix socket there, run as nobody when the tests run as root (PostgreSQL refuses root), stopped
/// and removed when released.
public final class TestPostgres {
    public let directory: String
    /// A libpq connection string for the server's `postgres` database.
    public let conninfo: String
    private let user: uid_t?
    private var server = Process()
    static let binaries = "/usr/lib/postgresql/15/bin"

    public init() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binaries + "/initdb") else {
            throw XCTSkip("needs PostgreSQL 15 (Debian's postgresql)")
        }
        user = getuid() == 0 ? 65534 : nil
        directory = NSTemporaryDirectory() + "postgres-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o700)
        if let user { chown(directory, user, user) }
        conninfo = "host=\(directory) dbname=postgres user=postgres connect_timeout=10"
        try run("initdb", ["-D", directory + "/data", "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
        // The server in the foreground, as this process's child (pg_ctl would leave it daemonized).
        var command = [
            Self.binaries + "/postgres", "-D", directory + "/data", "-k", directory, "-c", "listen_addresses=",
            "-c", "fsync=off",
        ]
        if let user {
            command =
                [
                    "/usr/bin/setpriv", "--reuid", "\(user)", "--regid", "\(user)", "--clear-groups", "--pdeathsig",
                    "TERM",
                ] + command
        }
        self.command = command
        _ = FileManager.default.createFile(atPath: directory + "/log", contents: nil)
        if let user { chown(directory + "/log", user, user) }
        try start()
    }

    private var command: [String] = []

    private func start() throws {
        server = Process()
        server.executableURL = URL(fileURLWithPath: command[0])
        server.arguments = Array(command.dropFirst())
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/log"))
        log.seekToEndOfFile()
        server.standardOutput = log
        server.standardError = log
        try server.run()
        // The socket directory must let this (root) process in: it is only the cluster's.
        chmod(directory, 0o711)
        let deadline = Date().addingTimeInterval(30)
        while (try? query("SELECT 1")) != "1" {
            guard Date() < deadline, server.isRunning else {
                throw TestDaemon.Failure(
                    description:
                        "PostgreSQL did not start: \((try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? "")"
                )
            }
            usleep(50_000)
        }
    }

    /// Stops the server at once (what a crash or a restart does to its clients' connections) and
    /// starts it again on the same cluster.
    public func restart() throws {
        if server.isRunning {
            kill(server.processIdentifier, SIGINT)
            server.waitUntilExit()
        }
        try start()
    }

    deinit {
        // Fast shutdown: SIGINT.
        if server.isRunning {
            kill(server.processIdentifier, SIGINT)
            server.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs a PostgreSQL program as the cluster's user.
    @discardableResult
    private func run(_ program: String, _ arguments: [String]) throws -> String {
        let process = Process()
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments =
                ["--reuid", "\(user)", "--regid", "\(user)", "--clear-groups", Self.binaries + "/" + program]
                + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: Self.binaries + "/" + program)
            process.arguments = arguments
        }
        let result = try ChildProcess.run(process, input: nil, errorsToOutput: true)
        let output = String(decoding: result.stdout, as: UTF8.self)
        guard result.status == 0 else {
            throw TestDaemon.Failure(description: "\(program) failed (\(result.status)): \(output)")
        }
        return output
    }

    /// Runs `sql` with psql and returns what it printed (unaligned, tuples only).
    public func query(_ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = [conninfo, "-A", "-t", "-c", sql]
        let result = try ChildProcess.run(process, input: nil, errorsToOutput: true)
        return String(decoding: result.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Every byte of the cluster's files (tables, WAL), for a scan of what is stored in the clear.
    public func allFileBytes() throws -> Data {
        _ = try? query("CHECKPOINT")
        var bytes = Data()
        for case let path as String in FileManager.default.enumerator(atPath: directory + "/data") ?? .init() {
            var isDirectory: ObjCBool = false
            let full = directory + "/data/" + path
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue,
                let contents = FileManager.default.contents(atPath: full)
            {
                bytes.append(contents)
            }
        }
        return bytes
    }
}
