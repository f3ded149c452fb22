import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// `security backup` as a user runs it, and a restore killed at any moment.
final class BackupCommandTests: XCTestCase {
    private let client = ClientIdentity(accessGroups: ["TEAM.cli"])

    private func items(_ prefix: String, count: Int) -> [[String: ItemValue]] {
        (0..<count).map { index in
            [
                "class": .string("genp"), "svce": .string("restore"), "acct": .string("\(prefix)-\(index)"),
                "v_Data": .data(Data("secret-\(prefix)-\(index)".utf8)),
            ]
        }
    }

    /// A backup (password "pw") of `count` items named new-0…, made from a keychain of its own that is
    /// removed again; the file, beside `home`, is the caller's to remove.
    private func backupOfNewItems(_ count: Int, beside home: String, name: String) throws -> String {
        let source = home + "-\(name)-source"
        let file = home + "-\(name).skbk"
        defer { try? FileManager.default.removeItem(atPath: source) }
        let keychain = try Keychain(directory: source)
        defer { keychain.closeIdleConnections() }
        try keychain.add(contentsOf: items("new", count: count), client: client)
        _ = try keychain.createBackup(at: file, password: SecureBytes(copying: Array("pw".utf8)))
        return file
    }

    private func accounts(in directory: String) throws -> Set<String> {
        let keychain = try Keychain(directory: directory)
        defer { keychain.closeIdleConnections() }
        let query: [String: ItemValue] = [
            "class": .string("genp"), "r_Attributes": .bool(true), "m_Limit": .string("m_LimitAll"),
        ]
        guard case .array(let found)? = try? keychain.copyMatching(query, client: client) else { return [] }
        return Set(
            found.compactMap { result -> String? in
                guard case .dictionary(let attributes) = result, case .string(let account)? = attributes["acct"]
                else { return nil }
                return account
            })
    }

    /// `security backup restore file` started in the background, its password given on standard input.
    private func startRestore(of file: String, by cli: CommandRunner) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli.executable)
        process.arguments = ["backup", "restore", file]
        process.environment = cli.environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data("pw\n".utf8))
        return process
    }

    /// A restore killed with SIGKILL at any moment leaves the keychain as it was or fully restored,
    /// never a mix: the restore is one transaction, and SQLite rolls an unfinished one back.
    func testARestoreKilledAtAnyMomentLeavesTheOldKeychainOrTheRestoredOne() throws {
        let cli = CommandRunner()
        let source = cli.home + "-source"
        let file = cli.home + "-backup.skbk"
        defer {
            try? FileManager.default.removeItem(atPath: source)
            try? FileManager.default.removeItem(atPath: file)
        }
        let count = 1000
        do {
            let keychain = try Keychain(directory: source)
            try keychain.add(contentsOf: items("new", count: count), client: client)
            _ = try keychain.createBackup(at: file, password: SecureBytes(copying: Array("pw".utf8)))
            keychain.closeIdleConnections()
        }
        let old = Set((0..<count).map { "old-\($0)" })
        let new = Set((0..<count).map { "new-\($0)" })
        func freshHome() throws {
            try? FileManager.default.removeItem(atPath: cli.home)
            let keychain = try Keychain(directory: cli.home)
            try keychain.add(contentsOf: items("old", count: count), client: client)
            keychain.closeIdleConnections()
        }
        // How long a whole restore takes here, to spread the kills over it.
        try freshHome()
        let start = Date()
        let whole = try cli.run("backup", "restore", file, input: "pw\n")
        XCTAssertEqual(whole.status, 0, whole.stderr)
        let duration = Date().timeIntervalSince(start)
        XCTAssertEqual(try accounts(in: cli.home), new)

        var outcomes: [String: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<10 {
            try freshHome()
            let process = try startRestore(of: file, by: cli)
            // Anywhere from the start to a little past the end of a whole restore; every other round in
            // its last part, where the transaction runs (the password's derivation comes first).
            let earliest = round % 2 == 0 ? 0.02 : duration * 0.6
            let delay = Double.random(in: earliest...(duration * 1.05), using: &generator)
            usleep(useconds_t(delay * 1_000_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            // The protective child dies with its parent; give it the moment it takes.
            usleep(100_000)
            let found = try accounts(in: cli.home)
            XCTAssertTrue(found == old || found == new, "round \(round): \(found.count) items, a mix")
            outcomes[found == old ? "old" : "restored", default: 0] += 1
        }
        // What the rounds came to, for whoever reads the log.
        print("kill -9 during restore: \(outcomes)")
    }

    func testTheVerbsSayWhatTheyDidAndRefuseBadFiles() throws {
        let cli = CommandRunner()
        let file = cli.home + "-verbs.skbk"
        defer { try? FileManager.default.removeItem(atPath: file) }
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "me", "-s", "svc", "-w", "one").status, 0)
        XCTAssertEqual(
            try cli.run("add-generic-password", "-a", "dev", "-s", "svc", "-w", "two", "-A", "AlwaysThisDeviceOnly")
                .status, 0)
        let made = try cli.run("backup", "create", file, input: "pw\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertEqual(made.stdout, "backup written to \(file): 2 items\n")
        XCTAssertEqual(made.stderr, "", "no progress bar when standard error is not a terminal")
        let info = try cli.run("backup", "info", file)
        XCTAssertTrue(info.stdout.contains("items: 2 (genp 2)"), info.stdout)
        XCTAssertTrue(info.stdout.contains("by protection: ak 1, dku 1"), info.stdout)
        XCTAssertFalse(info.stdout.contains("me"), "no attribute value in the summary")

        // No password on standard input: nothing is written.
        let other = cli.home + "-none.skbk"
        let refused = try cli.run("backup", "create", other, input: "")
        XCTAssertEqual(refused.status, 1, refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: other))

        // Not a backup, empty, missing: errSecDecode (exit 0xff & -26275) or a parameter error.
        try Data("not a backup at all".utf8).write(to: URL(fileURLWithPath: other))
        let notBackup = try cli.run("backup", "info", other)
        XCTAssertEqual(notBackup.status, Int32(UInt32(bitPattern: -26275) & 0xff), notBackup.stderr)
        XCTAssertTrue(notBackup.stderr.contains("not a keychain backup file"), notBackup.stderr)
        try Data().write(to: URL(fileURLWithPath: other))
        XCTAssertEqual(
            try cli.run("backup", "restore", other, input: "pw\n").status, Int32(UInt32(bitPattern: -26275) & 0xff))
        try? FileManager.default.removeItem(atPath: other)
        XCTAssertEqual(try cli.run("backup", "info", other).status, Int32(UInt32(bitPattern: -50) & 0xff))

        // A wrong password: exit 51, and the keychain keeps what it has.
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "later", "-s", "svc", "-w", "three").status, 0)
        let wrong = try cli.run("backup", "restore", file, input: "nope\n")
        XCTAssertEqual(wrong.status, 51, wrong.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "later", "-s", "svc", "-w").stdout, "three\n")
        let restored = try cli.run("backup", "restore", file, input: "pw\n")
        XCTAssertEqual(restored.status, 0, restored.stderr)
        XCTAssertTrue(restored.stdout.hasPrefix("restored 2 items from \(file)\n"), restored.stdout)
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "later", "-s", "svc").status, 44)
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "dev", "-s", "svc", "-w").stdout, "two\n")
    }

    /// The scenario of a lost phone, from the shell: back up, erase, restore onto "the new device".
    func testEraseThenRestoreFromTheShell() throws {
        let cli = CommandRunner()
        let file = cli.home + "-device.skbk"
        defer { try? FileManager.default.removeItem(atPath: file) }
        XCTAssertEqual(try cli.run("add-generic-password", "-a", "me", "-s", "svc", "-w", "moves").status, 0)
        XCTAssertEqual(
            try cli.run("add-generic-password", "-a", "here", "-s", "svc", "-w", "stays", "-A", "AlwaysThisDeviceOnly")
                .status, 0)
        XCTAssertEqual(try cli.run("backup", "create", file, input: "pw\n").status, 0)
        let unconfirmed = try cli.run("device", "erase")
        XCTAssertEqual(unconfirmed.status, 1, unconfirmed.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "me", "-s", "svc", "-w").stdout, "moves\n")
        let erased = try cli.run("device", "erase", "-y")
        XCTAssertEqual(erased.status, 0, erased.stderr)
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "me", "-s", "svc").status, 44)
        let restored = try cli.run("device", "restore", file, input: "pw\n")
        XCTAssertEqual(restored.status, 0, restored.stderr)
        XCTAssertTrue(restored.stdout.contains("not restored: 1 ThisDeviceOnly"), restored.stdout)
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "me", "-s", "svc", "-w").stdout, "moves\n")
        XCTAssertEqual(try cli.run("find-generic-password", "-a", "here", "-s", "svc").status, 44)
        XCTAssertEqual(try cli.run("device", "reboot").status, 0)
    }

    /// A file-size limit during a backup or a restore: errSecDiskFull (or the database's write error),
    /// no partial backup file, and a keychain as it was.
    func testAFileSizeLimitLeavesNoPartialBackupAndNoHalfRestoredKeychain() throws {
        let cli = CommandRunner()
        let work = cli.home + "-limit"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let file = work + "/big.skbk"
        do {
            let keychain = try Keychain(directory: cli.home)
            try keychain.add(contentsOf: items("old", count: 2000), client: client)
            keychain.closeIdleConnections()
        }
        // ulimit -f counts blocks of 512 bytes in dash: 128 KiB, room for the database's shared-memory
        // file and far less than a backup of 2,000 items.
        let limited = try cli.run(
            program: "/bin/sh", ["-c", "ulimit -f 256; exec \"$0\" backup create \"$1\"", cli.executable, file],
            input: "pw\n")
        XCTAssertEqual(limited.status, Int32(UInt32(bitPattern: -34) & 0xff), limited.stderr)
        XCTAssertTrue(limited.stderr.contains("SecKeychainCopyBackup"), limited.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work), [], "no backup, no partial file")

        // A good backup of other items, restored under a limit the database outgrows: rolled back.
        let source = cli.home + "-limit-source"
        defer { try? FileManager.default.removeItem(atPath: source) }
        do {
            let keychain = try Keychain(directory: source)
            try keychain.add(contentsOf: items("new", count: 2000), client: client)
            _ = try keychain.createBackup(at: file, password: SecureBytes(copying: Array("pw".utf8)))
            keychain.closeIdleConnections()
        }
        let restore = try cli.run(
            program: "/bin/sh", ["-c", "ulimit -f 256; exec \"$0\" backup restore \"$1\"", cli.executable, file],
            input: "pw\n")
        XCTAssertEqual(restore.status, Int32(UInt32(bitPattern: -34) & 0xff), restore.stderr)
        XCTAssertTrue(restore.stderr.contains("disk is full"), restore.stderr)
        XCTAssertEqual(try accounts(in: cli.home), Set((0..<2000).map { "old-\($0)" }), "the keychain as it was")
    }

    /// A disk that is really full (a small tmpfs holding the keychain, filled up): a backup onto it and
    /// a restore into the keychain on it are errSecDiskFull, leave no partial backup file, and leave the
    /// keychain as it was.
    func testAFullDiskLeavesNoPartialBackupAndNoHalfRestoredKeychain() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/bin/mount") else {
            throw XCTSkip("needs root to mount a small file system")
        }
        let cli = CommandRunner()
        try FileManager.default.createDirectory(atPath: cli.home, withIntermediateDirectories: true)
        func tool(_ path: String, _ arguments: [String]) throws -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
            return try ChildProcess.run(process).status
        }
        guard try tool("/bin/mount", ["-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", cli.home]) == 0 else {
            throw XCTSkip("cannot mount a tmpfs here")
        }
        defer { _ = try? tool("/bin/umount", [cli.home]) }
        do {
            let keychain = try Keychain(directory: cli.home)
            try keychain.add(contentsOf: items("old", count: 500), client: client)
            keychain.closeIdleConnections()
        }
        let file = try backupOfNewItems(3000, beside: cli.home, name: "full")
        defer { try? FileManager.default.removeItem(atPath: file) }
        // Everything but 160 KiB taken: room to open the keychain, none for 3,000 items.
        var info = statvfs()
        XCTAssertEqual(statvfs(cli.home, &info), 0)
        let free = Int(info.f_bavail) * Int(info.f_frsize)
        let filler = cli.home + "/filler"
        XCTAssertTrue(FileManager.default.createFile(atPath: filler, contents: Data(count: max(0, free - (160 << 10)))))

        let restore = try cli.run("backup", "restore", file, input: "pw\n")
        XCTAssertEqual(restore.status, Int32(UInt32(bitPattern: -34) & 0xff), restore.stderr)
        XCTAssertTrue(restore.stderr.contains("disk is full"), restore.stderr)
        // And all but 64 KiB (room to open the keychain) for a backup of the 500 items.
        XCTAssertEqual(statvfs(cli.home, &info), 0)
        let room = Int(info.f_bavail) * Int(info.f_frsize)
        XCTAssertTrue(
            FileManager.default.createFile(atPath: filler + "-2", contents: Data(count: max(0, room - (64 << 10)))))
        let backup = try cli.run("backup", "create", cli.home + "/full.skbk", input: "pw\n")
        XCTAssertEqual(backup.status, Int32(UInt32(bitPattern: -34) & 0xff), backup.stderr)
        XCTAssertTrue(
            backup.stderr.contains("SecKeychainCopyBackup"), "the file's write, not the open: \(backup.stderr)")
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: cli.home).filter { $0.contains("skbk") }, [],
            "no backup, no partial file")
        try FileManager.default.removeItem(atPath: filler)
        try FileManager.default.removeItem(atPath: filler + "-2")
        XCTAssertEqual(try accounts(in: cli.home), Set((0..<500).map { "old-\($0)" }), "the keychain as it was")
    }

    /// On a terminal, a backup and a restore draw a progress bar on standard error.
    func testAProgressBarIsDrawnOnATerminal() throws {
        let script = "/usr/bin/script"
        guard FileManager.default.isExecutableFile(atPath: script) else {
            throw XCTSkip("util-linux's script, which gives the command a terminal, is not installed")
        }
        let cli = CommandRunner()
        let file = cli.home + "-bar.skbk"
        defer { try? FileManager.default.removeItem(atPath: file) }
        for account in ["a", "b", "c"] {
            XCTAssertEqual(try cli.run("add-generic-password", "-a", account, "-s", "svc", "-w", "x").status, 0)
        }
        let run = try cli.run(
            program: script, ["-qec", "\"\(cli.executable)\" backup create \"\(file)\" --no-password", "/dev/null"])
        XCTAssertEqual(run.status, 0, run.stdout)
        XCTAssertTrue(run.stdout.contains("backing up ["), run.stdout)
        XCTAssertTrue(run.stdout.contains("100% 3/3"), run.stdout)
        let restore = try cli.run(
            program: script, ["-qec", "\"\(cli.executable)\" backup restore \"\(file)\"", "/dev/null"])
        XCTAssertEqual(restore.status, 0, restore.stdout)
        XCTAssertTrue(restore.stdout.contains("restoring [") && restore.stdout.contains("100% 3/3"), restore.stdout)
    }

    /// Another user plants a link (or a directory) at the backup's name in a shared sticky directory:
    /// the command writes through neither, leaves no partial file, and the link's target is untouched.
    func testALinkOrDirectoryPlantedByAnotherUserIsNeverWrittenThrough() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            throw XCTSkip("needs root and setpriv to act as two users")
        }
        let (planter, victim): (uid_t, uid_t) = (65534, 65533)
        let cli = CommandRunner()
        let shared = cli.home + "-shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        chmod(shared, 0o1777)
        let home = shared + "/victim-home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        chown(home, victim, victim)
        chmod(home, 0o700)
        let target = shared + "/victims-file"
        try Data("untouched".utf8).write(to: URL(fileURLWithPath: target))
        chown(target, victim, victim)
        let link = shared + "/backup.skbk"
        XCTAssertEqual(symlink(target, link), 0)
        lchown(link, planter, planter)
        let directory = shared + "/dir.skbk"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        chown(directory, planter, planter)

        cli.extraEnvironment["KEYCHAIN_HOME"] = home
        func asVictim(_ arguments: [String], input: String? = nil) throws -> CommandResult {
            try cli.run(
                program: "/usr/bin/setpriv",
                ["--reuid=\(victim)", "--regid=\(victim)", "--clear-groups", "--", cli.executable] + arguments,
                input: input)
        }
        XCTAssertEqual(try asVictim(["add-generic-password", "-a", "me", "-s", "svc", "-w", "secret"]).status, 0)
        let throughLink = try asVictim(["backup", "create", link, "--no-password"])
        XCTAssertNotEqual(throughLink.status, 0, throughLink.stdout)
        XCTAssertTrue(throughLink.stderr.contains("cannot put the backup at"), throughLink.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: target)), Data("untouched".utf8))
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: link), target, "the link stays")
        let intoDirectory = try asVictim(["backup", "create", directory, "--no-password"])
        XCTAssertNotEqual(intoDirectory.status, 0, intoDirectory.stdout)
        XCTAssertTrue(intoDirectory.stderr.contains("is a directory"), intoDirectory.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [])
        let left = try FileManager.default.contentsOfDirectory(atPath: shared).filter { $0.contains(".partial-") }
        XCTAssertEqual(left, [], "no partial file")
    }

    /// A restore while another process writes: the restore is one transaction, which the writer waits
    /// for or goes before. Every item of the backup is there afterwards, whole, and every item the other
    /// process added is either there, whole, or was replaced with the rest of the keychain's own.
    func testARestoreRacingAnotherClientsWritesLeavesEveryItemWhole() throws {
        let cli = CommandRunner()
        let file = try backupOfNewItems(1000, beside: cli.home, name: "race")
        defer { try? FileManager.default.removeItem(atPath: file) }
        let writer = try Keychain(directory: cli.home)
        defer { writer.closeIdleConnections() }
        let process = try startRestore(of: file, by: cli)
        var written = 0
        while process.isRunning, written < 2000 {
            try writer.add(contentsOf: items("racer-\(written)", count: 1), client: client)
            written += 1
        }
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertGreaterThan(written, 0)
        let found = try accounts(in: cli.home)
        XCTAssertTrue(Set((0..<1000).map { "new-\($0)" }).isSubset(of: found), "every restored item")
        // Whatever is listed opens, secret and all: no row was left half-written.
        let reader = try Keychain(directory: cli.home)
        defer { reader.closeIdleConnections() }
        for account in found {
            let query: [String: ItemValue] = [
                "class": .string("genp"), "svce": .string("restore"), "acct": .string(account), "r_Data": .bool(true),
            ]
            XCTAssertNotNil(try reader.copyMatching(query, client: client)?.bytes, account)
        }
    }
}
