import Foundation
import XCTest

/// A second review made the protective fork fail (a same-user process may lower another's
/// RLIMIT_NPROC) and read the passcode from the process that carried on; and sent SIGSEGV to the
/// child, whose crash reporter printed registers and the memory they pointed to, then carried on.
final class ProtectiveForkTests: XCTestCase {
    func testWithoutTheForkNothingIsDone() throws {
        let cli = CommandRunner()
        var prefix: [String] = []
        if geteuid() == 0 {
            // Root is not held to RLIMIT_NPROC: run as another user, with a keychain home of its own.
            XCTAssertEqual(mkdir(cli.home, 0o700), 0)
            XCTAssertEqual(chown(cli.home, 65534, 65534), 0)
            prefix = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        }
        let result = try cli.run(
            program: "/usr/bin/prlimit",
            ["--nproc=0:0", "--"] + prefix + [cli.executable, "add-generic-password", "-a", "a", "-s", "s", "-w", "pw"])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("cannot protect this process's memory"), result.stderr)
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: cli.home)) ?? [], [], "nothing written")
    }

    func testACrashSignalEndsTheCommandWithoutAReport() throws {
        let cli = CommandRunner()
        let command = Process()
        command.executableURL = URL(fileURLWithPath: cli.executable)
        command.arguments = ["add-generic-password", "-a", "a", "-s", "s", "-w"]
        command.environment = cli.environment
        let input = Pipe()
        let errors = Pipe()
        command.standardInput = input
        command.standardError = errors
        try command.run()
        var child: Int32?
        let deadline = Date().addingTimeInterval(10)
        while child == nil, Date() < deadline {
            let list =
                (try? String(
                    contentsOfFile: "/proc/\(command.processIdentifier)/task/\(command.processIdentifier)/children",
                    encoding: .utf8)) ?? ""
            child = list.split(separator: " ").compactMap { Int32($0) }.first
            usleep(1000)
        }
        usleep(100_000)
        kill(try XCTUnwrap(child), SIGSEGV)
        command.waitUntilExit()
        try? input.fileHandleForWriting.close()
        XCTAssertEqual(command.terminationReason, .uncaughtSignal)
        XCTAssertEqual(command.terminationStatus, SIGSEGV)
        let report = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(report, "", "no crash report with registers and memory")
    }
}
