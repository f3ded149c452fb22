import Foundation
import KeychainEngine
import Synchronization
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Attacks on the failed-passcode counter by a process of the same user running the command, as an
/// outside review carried them out. Each guess is a new `security unlock-keychain -p GUESS` process.
final class PasscodeAttackTests: XCTestCase {
    private var cli: CommandRunner!

    override func setUpWithError() throws {
        cli = CommandRunner()
        XCTAssertEqual(try cli.run("set-keychain-password", "-p", "2468").status, 0)
    }

    override func tearDown() { cli = nil }

    private var keybag: String { cli.home + "/keybag" }

    private func failedAttempts() throws -> Int? {
        let info = try cli.run("show-keychain-info").stdout
        let line = info.split(separator: "\n").first { $0.contains("failed attempts:") }
        return line.flatMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }
    }

    private func inode(_ path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    /// Temporary files in the keychain directory (those of killed guesses stay behind).
    private func temporaries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: cli.home)) ?? []).filter { $0.contains(".tmp-") }
    }

    /// Starts a guess and kills it the moment it writes anything beside the keybag (a temporary file
    /// appears) or replaces the keybag (`onlyAfterReplace`). Returns whether it was killed, or exited first.
    private func guessKilledAtFirstWrite(_ guess: String, onlyAfterReplace: Bool = false) throws -> Bool {
        let before = inode(keybag)
        let leftovers = Set(temporaries())
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli.executable)
        process.arguments = ["unlock-keychain", "-p", guess]
        process.environment = cli.environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning, Date() < deadline {
            let replaced = inode(keybag) != before
            let temporary = !onlyAfterReplace && !Set(temporaries()).subtracting(leftovers).isEmpty
            if replaced || temporary {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return true
            }
            usleep(100)
        }
        process.waitUntilExit()
        return false
    }

    /// The review killed each guess as soon as its `keybag.tmp-<pid>` appeared: only wrong guesses wrote
    /// one (after the check), so the file was the answer, and killing the writer kept the count at 0.
    func testKillingAGuessAtItsFirstWriteTeachesNothing() throws {
        for guess in ["1357", "2468", "0000"] {
            XCTAssertTrue(
                try guessKilledAtFirstWrite(guess),
                "\(guess): every attempt, right or wrong, writes its count before it is answered")
        }
        // Killed after its count was on disk, a guess counts (the three above count or not, depending
        // on whether the kill came before the keybag was replaced: at most four, below the first delay).
        let counted = try failedAttempts() ?? -1
        XCTAssertTrue(try guessKilledAtFirstWrite("1111", onlyAfterReplace: true))
        XCTAssertEqual(try failedAttempts(), counted + 1)
        XCTAssertEqual(try cli.run("unlock-keychain", "-p", "2468").status, 0)
        XCTAssertEqual(try failedAttempts(), 0)
    }

    /// Any user may start the command in a time namespace whose clock since boot is hours ahead
    /// (`unshare -U -T --boottime`): the red-team review skipped every delay that way.
    func testAClockSinceBootMovedAheadInATimeNamespaceDoesNotSkipTheDelay() throws {
        let probe = try cli.run(program: "/usr/bin/unshare", timeNamespace(4000) + ["/bin/true"])
        try XCTSkipUnless(probe.status == 0, "time namespaces are not available here: \(probe.stderr)")
        for _ in 1...5 { XCTAssertEqual(try cli.run("unlock-keychain", "-p", "0000").status, 51) }
        for offset in [4000, 8000] {
            let guess = try cli.run(
                program: "/usr/bin/unshare", timeNamespace(offset) + [cli.executable, "unlock-keychain", "-p", "2468"])
            XCTAssertEqual(guess.status, 36, "+\(offset) s since boot: still waiting: \(guess.stderr)")
        }
        XCTAssertEqual(try failedAttempts(), 5)
    }

    private func timeNamespace(_ seconds: Int) -> [String] {
        (geteuid() == 0 ? [] : ["-U", "--map-current-user"]) + ["-T", "--boottime", "\(seconds)", "--fork"]
    }

    /// With writes failing (`ulimit -f 0`, or a full disk), a wrong guess used to end with an I/O error
    /// and the count unchanged, and a right one with success: an uncounted oracle. Now both are refused.
    func testAGuessThatCannotBeCountedIsRefusedUnchecked() throws {
        // Another process keeps the database open, so SQLite's files are all there and the guess's
        // process needs to write nothing but the keybag.
        let holder = try Keychain(directory: cli.home)
        _ = try? holder.copyMatching(["class": .string("genp")], client: ClientIdentity(accessGroups: ["TEAM.cli"]))
        var results: [String: CommandResult] = [:]
        for guess in ["1357", "2468"] {
            results[guess] = try cli.run(
                program: "/bin/sh", ["-c", "ulimit -f 0; exec \"$0\" unlock-keychain -p \"$1\"", cli.executable, guess])
        }
        for (guess, result) in results {
            XCTAssertEqual(result.status, 220, "\(guess): errSecIO (-36), whether right or wrong: \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("could not be recorded"), result.stderr)
        }
        // Nothing tells the right guess apart (the temporary file's random name aside).
        let reasons = results.mapValues { $0.stderr.components(separatedBy: ".tmp-").first ?? "" }
        XCTAssertEqual(reasons["1357"], reasons["2468"])
        XCTAssertEqual(try failedAttempts(), 0)
        withExtendedLifetime(holder) {}
    }

    /// The review deleted `keybag.lock` in a loop while four wrong guesses ran at once: only two or
    /// three were counted. Every guess must be.
    func testSimultaneousGuessesAreAllCounted() throws {
        let stopped = Mutex(false)
        let deleter = Thread { [home = cli.home] in
            while !stopped.withLock({ $0 }) {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: home)) ?? []
                where name.hasSuffix(".lock") {
                    unlink(home + "/" + name)
                }
                usleep(50)
            }
        }
        deleter.start()
        let processes = (0..<4).map { index -> Process in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: cli.executable)
            process.arguments = ["unlock-keychain", "-p", "000\(index)"]
            process.environment = cli.environment
            process.standardError = FileHandle.nullDevice
            return process
        }
        for process in processes { try process.run() }
        for process in processes { process.waitUntilExit() }
        stopped.withLock { $0 = true }
        for process in processes { XCTAssertEqual(process.terminationStatus, 51, "errSecAuthFailed") }
        XCTAssertEqual(try failedAttempts(), 4)
    }
}
