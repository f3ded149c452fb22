import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import XCTest

/// The daemon's own memory.
final class DaemonMemoryTests: XCTestCase {
    func testTheDaemonIsNotDumpable() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        // Run as nobody: the kernel shows a non-dumpable process's /proc files as root's, a dumpable one's
        // as its own user's, so the owner tells whether other processes of that user could read it.
        let programs = try ClientPrograms()
        let home = programs.directory + "/home"
        let socket = programs.directory + "/run/securityd.sock"
        try FileManager.default.createDirectory(atPath: programs.directory + "/run", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        for directory in [home, programs.directory + "/run"] {
            chown(directory, 65534, 65534)
            chmod(directory, 0o700)
        }
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        daemon.arguments = [
            "--reuid", "65534", "--regid", "65534", "--clear-groups", TestDaemon.binary, "--home", home, "--socket",
            socket,
        ]
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        defer {
            daemon.terminate()
            daemon.waitUntilExit()
        }
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: socket), Date() < deadline { usleep(20_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: socket))
        // setpriv execs the daemon in place: same pid.
        var info = stat()
        XCTAssertEqual(stat("/proc/\(daemon.processIdentifier)/mem", &info), 0)
        XCTAssertEqual(info.st_uid, 0, "the daemon's memory file belongs to its user: it is dumpable")
        XCTAssertEqual(stat("/proc/\(daemon.processIdentifier)", &info), 0)
        XCTAssertEqual(info.st_uid, 65534, "the daemon runs as nobody")
        let limits = try String(contentsOfFile: "/proc/\(daemon.processIdentifier)/limits", encoding: .utf8)
        XCTAssertTrue(
            limits.split(separator: "\n").contains { $0.hasPrefix("Max core file size") && $0.contains(" 0 ") },
            limits)
    }
}
