import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// An outside review read a secret typed at the command's prompt out of `/proc/<pid>/mem` from another
/// process of the same user, and out of a core file. The command now refuses both.
final class MemoryProtectionTests: XCTestCase {
    private let nobody = "65534"

    func testAnotherProcessOfTheSameUserCannotReadTheCommandsMemory() throws {
        let cli = CommandRunner()
        let asRoot = geteuid() == 0
        var program = cli.executable
        var arguments = ["add-generic-password", "-a", "memory", "-s", "memory", "-w"]
        var scratch: String?
        if asRoot {
            // Root may read any process; the attack is by a process of the same, ordinary, user.
            let directory = NSTemporaryDirectory() + "memory-test-" + UUID().uuidString
            scratch = directory
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            XCTAssertEqual(chmod(directory, 0o755), 0)
            try FileManager.default.copyItem(atPath: cli.executable, toPath: directory + "/security")
            try FileManager.default.copyItem(atPath: cli.executable + "-full", toPath: directory + "/security-full")
            XCTAssertEqual(mkdir(cli.home, 0o700), 0)
            XCTAssertEqual(chown(cli.home, 65534, 65534), 0)
            arguments = asNobody([directory + "/security"] + arguments)
            program = "/usr/bin/setpriv"
        }
        defer { scratch.map { try? FileManager.default.removeItem(atPath: $0) } }

        // Started with core files allowed, as a user's shell may allow them.
        let command = Process()
        command.executableURL = URL(fileURLWithPath: "/bin/sh")
        command.arguments = ["-c", "ulimit -c unlimited && exec \"$@\"", "sh", program] + arguments
        command.environment = cli.environment
        let input = Pipe()
        command.standardInput = input
        command.standardOutput = FileHandle.nullDevice
        try command.run()
        let pid = command.processIdentifier
        // It waits for the password on standard input; its limit on core files drops to 0 as it starts.
        let deadline = Date().addingTimeInterval(10)
        let binary = URL(fileURLWithPath: arguments.first { $0.hasSuffix("/security") } ?? program).lastPathComponent
        while Date() < deadline, !(executableName(of: pid) == binary && coreLimit(of: pid) == "0") { usleep(10_000) }
        XCTAssertEqual(executableName(of: pid), binary)
        XCTAssertEqual(coreLimit(of: pid), "0", "no core file can be written")
        XCTAssertFalse(try memoryIsReadable(pid, asNobody: asRoot), "another process of the user reads its memory")

        // The same reader does read an ordinary process of that user: the check above can fail.
        let ordinary = Process()
        ordinary.executableURL = URL(fileURLWithPath: asRoot ? "/usr/bin/setpriv" : "/bin/sleep")
        ordinary.arguments = asRoot ? asNobody(["/bin/sleep", "5"]) : ["5"]
        try ordinary.run()
        usleep(200_000)
        XCTAssertTrue(try memoryIsReadable(ordinary.processIdentifier, asNobody: asRoot))
        ordinary.terminate()
        ordinary.waitUntilExit()

        input.fileHandleForWriting.write(Data("typed-secret\n".utf8))
        try input.fileHandleForWriting.close()
        command.waitUntilExit()
        XCTAssertEqual(command.terminationStatus, 0)
    }

    private func asNobody(_ command: [String]) -> [String] {
        ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "--"] + command
    }

    private func executableName(of pid: Int32) -> String? {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")).map {
            URL(fileURLWithPath: $0).lastPathComponent
        }
    }

    /// The soft limit on core files of `pid`, from /proc/<pid>/limits.
    private func coreLimit(of pid: Int32) -> String? {
        guard let limits = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8),
            let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max core file size") })
        else { return nil }
        return line.dropFirst("Max core file size".count).split(separator: " ").first.map(String.init)
    }

    /// Whether a process of the same user (nobody, when the tests run as root) can open its memory.
    private func memoryIsReadable(_ pid: Int32, asNobody: Bool) throws -> Bool {
        guard asNobody else {
            let descriptor = open("/proc/\(pid)/mem", O_RDONLY)
            if descriptor >= 0 { close(descriptor) }
            return descriptor >= 0
        }
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        reader.arguments = self.asNobody(["/bin/sh", "-c", "exec 3< /proc/$0/mem", "\(pid)"])
        reader.standardError = FileHandle.nullDevice
        try reader.run()
        reader.waitUntilExit()
        return reader.terminationStatus == 0
    }

    /// The red-team review opened the command's /proc/<pid>/mem in the moments after exec, before it
    /// protected itself, and kept reading it afterwards: the passcode was there. The process that was
    /// exec'd never holds a secret now; the child forked after protection does.
    func testTheSecretIsNeverInTheMemoryOfTheProcessThatWasExecuted() throws {
        try XCTSkipUnless(geteuid() == 0, "reading both processes' memory to check this needs root")
        let cli = CommandRunner()
        XCTAssertEqual(try cli.run("set-keychain-password", "-p", "Correct-Horse-7391").status, 0)
        let command = Process()
        command.executableURL = URL(fileURLWithPath: cli.executable)
        command.arguments = ["unlock-keychain"]
        command.environment = cli.environment
        let input = Pipe()
        command.standardInput = input
        try command.run()
        let executed = command.processIdentifier
        let early = open("/proc/\(executed)/mem", O_RDONLY)  // as the attacker did, right after exec
        defer { if early >= 0 { close(early) } }
        let deadline = Date().addingTimeInterval(10)
        var worker: Int32?
        while worker == nil, Date() < deadline {
            worker = children(of: executed).first
            usleep(1000)
        }
        let child = try XCTUnwrap(worker, "the work happens in a child")
        input.fileHandleForWriting.write(Data("Correct-Horse-7391\n".utf8))
        // The child derives the passcode key for about a quarter of a second: look while it does.
        usleep(80_000)
        let secret = Data("Correct-Horse-7391".utf8)
        XCTAssertFalse(memory(of: executed, contains: secret, descriptor: early), "the exec'd process never read it")
        XCTAssertTrue(memory(of: child, contains: secret, descriptor: -1), "the search finds it where it is")
        try input.fileHandleForWriting.close()
        command.waitUntilExit()
        XCTAssertEqual(command.terminationStatus, 0)
    }

    private func children(of pid: Int32) -> [Int32] {
        let list = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        return list.split(separator: " ").compactMap { Int32($0) }
    }

    /// Whether `secret` is in a writable mapping of `pid`, read through `descriptor` (or a new one).
    private func memory(of pid: Int32, contains secret: Data, descriptor: Int32) -> Bool {
        let mem = descriptor >= 0 ? descriptor : open("/proc/\(pid)/mem", O_RDONLY)
        guard mem >= 0 else { return false }
        defer { if descriptor < 0 { close(mem) } }
        // Read to the end: /proc files report no size, and Foundation's one read returns only a page.
        let maps = String(
            decoding: FileHandle(forReadingAtPath: "/proc/\(pid)/maps")?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, fields[1].hasPrefix("rw") else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2, bounds[1] > bounds[0], bounds[1] - bounds[0] < 1 << 30 else { continue }
            var region = Data(count: Int(bounds[1] - bounds[0]))
            let read = region.withUnsafeMutableBytes { pread(mem, $0.baseAddress, $0.count, off_t(bounds[0])) }
            guard read > 0 else { continue }
            if region.prefix(read).range(of: secret) != nil { return true }
        }
        return false
    }
}
