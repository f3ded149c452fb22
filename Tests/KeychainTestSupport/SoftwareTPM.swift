import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A software TPM (swtpm, socket mode) of a test's own: a Unix socket in a temporary directory, its
/// state in that directory, stopped and removed by `stop()`. Several can run at once (a second
/// "machine" is a second swtpm).
public final class SoftwareTPM: @unchecked Sendable {
    public let directory: String
    public var socketPath: String { directory + "/sock" }
    /// The TCTI string for this TPM.
    public var tcti: String { "swtpm:path=\(socketPath)" }
    private var pid: pid_t = 0

    /// Whether swtpm is installed; tests that need it are skipped with a message otherwise.
    public static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm_ioctl")
    }

    /// Starts a new TPM (empty state: a new owner seed, so a new storage primary).
    public init() throws {
        let base = NSTemporaryDirectory() + "swtpm-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        chmod(base, 0o700)
        directory = base
        try start()
    }

    /// Starts swtpm on the directory's state (again, after `kill()`: the same TPM, its transient
    /// objects gone, as after a reboot).
    public func start() throws {
        // swtpm forks into the background and its child keeps every inherited descriptor, which
        // Foundation's Process waits on: spawned and reaped directly instead.
        let status = try Self.spawnAndWait(
            "/usr/bin/swtpm",
            [
                "socket", "--tpm2", "--tpmstate", "dir=\(directory)",
                "--server", "type=unixio,path=\(socketPath)", "--ctrl", "type=unixio,path=\(socketPath).ctrl",
                "--flags", "not-need-init,startup-clear", "--daemon", "--pid", "file=\(directory)/pid",
            ])
        guard status == 0 else {
            throw TestDaemon.Failure(description: "swtpm did not start (status \(status))")
        }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: directory + "/pid", encoding: .utf8),
                let number = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)),
                access(socketPath, F_OK) == 0
            {
                pid = number
                return
            }
            usleep(10_000)
        }
        throw TestDaemon.Failure(description: "swtpm did not write its pid and socket")
    }

    /// Lets `uid` reach the TPM (its directory and socket), for a daemon that runs as that user.
    public func allow(uid: uid_t) {
        for path in [directory, socketPath, socketPath + ".ctrl"] { chown(path, uid, uid) }
    }

    /// Kills the TPM process at once (no orderly shutdown), keeping its state.
    public func kill() {
        guard pid > 0 else { return }
        Glibc.kill(pid, SIGKILL)
        waitForExit()
        unlink(socketPath)
        unlink(socketPath + ".ctrl")
        unlink(directory + "/pid")
    }

    /// Runs a tpm2-tools command against this TPM (`tpm2_clear`, `tpm2_nvundefine`, …); its status.
    @discardableResult
    public func tool(_ name: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + name)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2TOOLS_TCTI"] = tcti
        environment["TSS2_LOG"] = "all+NONE"
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Stops the TPM and removes its directory.
    public func stop() {
        if pid > 0 {
            let control = Process()
            control.executableURL = URL(fileURLWithPath: "/usr/bin/swtpm_ioctl")
            control.arguments = ["--unix", socketPath + ".ctrl", "-s"]
            control.standardOutput = FileHandle.nullDevice
            control.standardError = FileHandle.nullDevice
            if (try? control.run()) != nil { control.waitUntilExit() }
            waitForExit()
            if Glibc.kill(pid, 0) == 0 { Glibc.kill(pid, SIGKILL) }
            waitForExit()
            pid = 0
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `path` with standard input, output and error on /dev/null; its exit status.
    private static func spawnAndWait(_ path: String, _ arguments: [String]) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in 0...2 {
            posix_spawn_file_actions_addopen(
                &actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, path, &actions, nil, argv, environ)
        guard spawned == 0 else { throw TestDaemon.Failure(description: "cannot start \(path): errno \(spawned)") }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }

    private func waitForExit() {
        let deadline = Date().addingTimeInterval(5)
        while Glibc.kill(pid, 0) == 0, Date() < deadline { usleep(5_000) }
    }

    deinit { stop() }
}
