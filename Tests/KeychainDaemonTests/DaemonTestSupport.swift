import Foundation
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Programs the daemon tests run as clients: copies of the test helper (each copy its own executable
/// path for the registry), `security`, as this user or as another.
final class ClientPrograms {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "securityd-clients-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    static func built(_ name: String) -> String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name).path
    }

    /// A copy of the test helper named `name`: an app of its own for the daemon.
    func app(_ name: String) throws -> String {
        let path = directory + "/" + name
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: Self.built("keychain-test-helper"), toPath: path)
        chmod(path, 0o755)
        return path
    }

    /// Runs `program` with `arguments` against `daemon` and returns its output (stdout and stderr) and
    /// exit status. `user` runs it as another uid (through setpriv).
    @discardableResult
    static func run(
        _ program: String, _ arguments: [String], daemon: TestDaemon?, environment extra: [String: String] = [:],
        input: String? = nil, user: uid_t? = nil
    ) throws -> (status: Int32, output: String) {
        let process = Process()
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid", "\(user)", "--regid", "\(user)", "--clear-groups", program] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = arguments
        }
        var environment = ProcessInfo.processInfo.environment
        environment["KEYCHAIN_SOCKET"] = daemon?.socket ?? ""
        environment["KEYCHAIN_LOG"] = "off"
        environment["KEYCHAIN_ACCESS_GROUPS"] = nil
        environment["KEYCHAIN_HOME"] = NSTemporaryDirectory() + "embedded-must-not-be-used-" + UUID().uuidString
        environment.merge(extra) { $1 }
        process.environment = environment
        let output = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// Whether tests that switch to another uid can run here.
var canSwitchUsers: Bool {
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && getpwuid(65534) != nil
}
