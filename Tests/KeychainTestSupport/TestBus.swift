import Foundation
import KeychainDBus
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A private message bus: `dbus-daemon` on a socket in a temporary directory, anyone may own any name
/// (as on a session bus), ended when released.
public final class TestBus {
    public let directory: String
    public let address: String
    private let process: Process

    /// A bus of its own; `user` runs it as that uid (this process must be root), as a user's session
    /// bus runs as the user. With `services`, the bus starts the services described by the D-Bus
    /// service files there when a name of theirs is first asked for, with `environment` added to its own.
    public init(user: uid_t? = nil, services: String? = nil, environment: [String: String] = [:]) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") else {
            throw XCTSkip("needs dbus-daemon (Debian's dbus-daemon package)")
        }
        directory = NSTemporaryDirectory() + "bus-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        address = "unix:path=\(directory)/bus"
        let configuration = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <listen>\(address)</listen>
              \(services.map { "<servicedir>\($0)</servicedir>" } ?? "")
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        try configuration.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        process = Process()
        let command = [
            "/usr/bin/dbus-daemon", "--config-file=\(directory)/bus.conf", "--nofork", "--nopidfile", "--nosyslog",
        ]
        // The bus ends with the test process, even one that crashes or is killed.
        var launcher = ["--pdeathsig", "TERM"]
        if let user {
            guard chown(directory, user, user) == 0 else {
                throw TestDaemon.Failure(description: "cannot give \(directory) to uid \(user)")
            }
            launcher = ["--reuid", "\(user)", "--regid", "\(user)", "--clear-groups"] + launcher
        }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = launcher + command
        process.standardOutput = FileHandle.nullDevice
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while (try? DBusConnection(address: address)) == nil {
            guard Date() < deadline, process.isRunning else {
                throw TestDaemon.Failure(description: "dbus-daemon did not start")
            }
            usleep(20_000)
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}
