import Foundation
import KeychainBytes
import KeychainCrypto
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

    /// A copy of the executable at `source` at `name` (a relative path) here, owned by this process's
    /// user and writable by no one else: another program for the daemon, at a path of its own.
    func copy(_ source: String, as name: String) throws -> String {
        let path = directory + "/" + name
        let folder = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        chmod(folder, 0o755)
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: source, toPath: path)
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
        let result = try ChildProcess.run(process, input: input.map { Data($0.utf8) }, errorsToOutput: true)
        let text = String(decoding: result.stdout, as: UTF8.self)
        return (result.status, text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// Whether tests that switch to another uid can run here.
var canSwitchUsers: Bool {
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && getpwuid(65534) != nil
}

/// `body` with the socket address of `path` (shorter than `sun_path`, as tests' paths are).
func withUnixAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
    }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// A listening Unix socket at `path`, inheritable (not closed on exec).
func listeningUnixSocket(at path: String) throws -> Int32 {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    let bound = withUnixAddress(path) { bind(descriptor, $0, $1) }
    guard descriptor >= 0, bound == 0, listen(descriptor, 16) == 0 else {
        throw TestDaemon.Failure(description: "cannot listen at \(path): errno \(errno)")
    }
    return descriptor
}

/// A plain connection to a daemon, for sending it bytes no client would.
final class RawConnection {
    let descriptor: Int32

    init(_ path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let descriptor = self.descriptor
        let result = withUnixAddress(path) { connect(descriptor, $0, $1) }
        guard result == 0 else {
            close(descriptor)
            throw TestDaemon.Failure(description: "cannot connect to \(path): errno \(errno)")
        }
    }

    deinit { close(descriptor) }

    func send(_ bytes: Data) {
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything the daemon sends until it closes the connection (or `timeout` passes: nil then).
    func readUntilClosed(timeout: TimeInterval = 10) -> Data? {
        var received = Data()
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { return received }
            received.append(contentsOf: buffer[..<count])
        }
        return nil
    }
}

enum SecureBytesHelper {
    static func bytes(_ text: String) -> SecureBytes { SecureBytes(copying: Array(text.utf8)) }
}
