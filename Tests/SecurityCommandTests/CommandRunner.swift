import Foundation
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Runs the built `security` binary as a subprocess on a throwaway keychain.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

final class CommandRunner {
    let home: String
    /// The emulated entitlements; nil runs the command without `KEYCHAIN_ACCESS_GROUPS`.
    var accessGroups: String? = "TEAM.cli"
    /// The binary to run: the built one unless a test copies it elsewhere.
    var executable = CommandRunner.executable
    /// Variables added to the environment of every run.
    var extraEnvironment: [String: String] = [:]

    init() {
        home = NSTemporaryDirectory() + "security-cli-" + UUID().uuidString
    }

    deinit { try? FileManager.default.removeItem(atPath: home) }

    static var executable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("security").path
    }

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["KEYCHAIN_HOME"] = home
        environment["KEYCHAIN_ACCESS_GROUPS"] = accessGroups
        environment["KEYCHAIN_LOG"] = "off"
        environment["KEYCHAIN_SOCKET"] = ""  // the embedded keychain unless a test names a daemon
        environment["KEYCHAIN_COMPANION"] = nil  // set by other suites in this process
        environment.merge(extraEnvironment) { $1 }
        return environment
    }

    @discardableResult
    func run(_ arguments: String..., input: String? = nil) throws -> CommandResult {
        try run(arguments, input: input)
    }

    func run(_ arguments: [String], input: String? = nil) throws -> CommandResult {
        try run(program: executable, arguments, input: input)
    }

    /// Runs another program (a shell, a helper) in the same environment as the command.
    func run(program: String, _ arguments: [String], input: String? = nil) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = environment
        let result = try ChildProcess.run(process, input: input.map { Data($0.utf8) })
        return CommandResult(
            status: result.status, stdout: String(decoding: result.stdout, as: UTF8.self),
            stderr: String(decoding: result.stderr, as: UTF8.self))
    }

    /// Runs with standard input and standard error on a pseudo-terminal, answering each prompt in
    /// `answers` (prompt text → line to type) as it appears. Returns the result and everything the
    /// terminal showed.
    func runOnTerminal(_ arguments: [String], answers: [(String, String)]) throws -> (CommandResult, String) {
        let master = PseudoTerminal.openMaster(O_RDWR | O_NOCTTY)
        guard master >= 0, PseudoTerminal.grant(master) == 0, PseudoTerminal.unlock(master) == 0,
            let name = PseudoTerminal.slaveName(master)
        else {
            throw NSError(domain: "pty", code: 1)
        }
        let slave = open(String(cString: name), O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw NSError(domain: "pty", code: 2) }
        defer { close(master) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
        process.standardError = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
        try process.run()
        close(slave)
        var screen = ""
        var pending = answers
        let deadline = Date().addingTimeInterval(20)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 100)
            if ready > 0 {
                let count = read(master, &buffer, buffer.count)
                if count <= 0 { break }
                screen += String(decoding: buffer[0..<count], as: UTF8.self)
            } else if !process.isRunning {
                break
            }
            if let (prompt, answer) = pending.first, screen.hasSuffix(prompt) {
                pending.removeFirst()
                _ = (answer + "\n").withCString { write(master, $0, strlen($0)) }
                screen += "⏎"
            }
        }
        if process.isRunning {
            // A prompt never came or an answer was lost: end the child rather than wait forever.
            process.terminate()
            screen += "[terminated: still running after 20 s]"
        }
        let out = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            CommandResult(status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self), stderr: ""),
            screen
        )
    }
}

/// posix_openpt and friends are not exported by Swift's Glibc module (they need _XOPEN_SOURCE), so they
/// are looked up in the C library at run time.
enum PseudoTerminal {
    private typealias OpenFunction = @convention(c) (Int32) -> Int32
    private typealias DescriptorFunction = @convention(c) (Int32) -> Int32
    private typealias NameFunction = @convention(c) (Int32) -> UnsafeMutablePointer<CChar>?

    private static func symbol<T>(_ name: String, as type: T.Type) -> T? {
        guard let pointer = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(pointer, to: type)
    }

    static func openMaster(_ flags: Int32) -> Int32 { symbol("posix_openpt", as: OpenFunction.self)?(flags) ?? -1 }
    static func grant(_ descriptor: Int32) -> Int32 {
        symbol("grantpt", as: DescriptorFunction.self)?(descriptor) ?? -1
    }
    static func unlock(_ descriptor: Int32) -> Int32 {
        symbol("unlockpt", as: DescriptorFunction.self)?(descriptor) ?? -1
    }
    static func slaveName(_ descriptor: Int32) -> UnsafeMutablePointer<CChar>? {
        symbol("ptsname", as: NameFunction.self)?(descriptor)
    }
}
