import CSQLite
import Foundation
import KeychainAuthenticators
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainTestSupport
import Synchronization
import XCTest

/// The engine's side of access control: what is on disk for a guarded item, and a prompt nobody
/// answers.
final class AuthenticationTests: EngineTestCase {
    private let guarded = AccessControlPolicy(
        protection: .whenUnlocked, flags: AccessControlPolicy.Flag.biometryCurrentSet)

    private func service(wait: Duration) throws -> InProcessKeychainService {
        let keychain = try Keychain(
            directory: directory,
            options: KeychainOptions(clock: clock, authenticators: .standard(biometryAnswerWait: wait)))
        return InProcessKeychainService(keychain: keychain, client: client)
    }

    func testAPromptNobodyAnswersEndsAsACancelAfterItsWait() throws {
        keychain = nil
        let service = try service(wait: .milliseconds(300))
        _ = try service.biometry(.enroll)
        var item = password("s", "a")
        item["accc"] = .accessControl(guarded)
        _ = try service.add(item)
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        let start = ContinuousClock.now
        XCTAssertThrowsError(try service.copyMatching(query)) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .userCanceled)
        }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(300))
        // An answer given while a prompt waits is taken by that prompt.
        let waiting = try self.service(wait: .seconds(20))
        let answerer = Thread {
            usleep(200_000)
            _ = try? waiting.biometry(.answer(.match))
        }
        answerer.start()
        XCTAssertEqual(try waiting.copyMatching(query), .data(Data("secret".utf8)))
        XCTAssertEqual(try waiting.biometry(.status).pendingAnswers, [])
    }

    func testTheBiometryFileHoldsNoEnrollmentSecretInTheClear() throws {
        keychain = nil
        let service = try service(wait: .zero)
        let status = try service.biometry(.enroll)
        let file = try XCTUnwrap(FileManager.default.contents(atPath: directory + "/biometry"))
        XCTAssertEqual(
            try FileManager.default.attributesOfItem(atPath: directory + "/biometry")[.posixPermissions] as? Int, 0o600)
        let text = String(decoding: file, as: UTF8.self)
        XCTAssertTrue(text.contains("sealedEnrollment"), text)
        XCTAssertFalse(text.contains("\"enrollment\""), text)
        // The domain state is a digest that changes with each enrollment.
        let again = try service.biometry(.enroll)
        XCTAssertNotEqual(status.domainState, again.domainState)
        XCTAssertEqual(status.domainState?.count, 32)
    }

    func testAGuardedSecretDoesNotOpenOnTheUnguardedPath() throws {
        keychain = nil
        let service = try service(wait: .zero)
        _ = try service.biometry(.enroll)
        _ = try service.biometry(.standingAnswer(.match))
        var item = password("s", "a", secret: "very-secret")
        item["accc"] = .accessControl(guarded)
        _ = try service.add(item)
        // Even with the class key, the blob is of the guarded version, whose content key mixes the
        // enrollment in: flipping its version byte makes it open on no path.
        let database = directory + "/" + Keychain.databaseName
        try flipSecretVersion(database)
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        XCTAssertThrowsError(try service.copyMatching(query)) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .itemNotFound)
        }
    }

    private func flipSecretVersion(_ database: String) throws {
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(database, &handle), SQLITE_OK)
        defer { sqlite3_close(handle) }
        func scalar(_ sql: String) -> Int64 {
            var statement: OpaquePointer?
            XCTAssertEqual(sqlite3_prepare_v2(handle, sql, -1, &statement, nil), SQLITE_OK)
            defer { sqlite3_finalize(statement) }
            XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
            return sqlite3_column_int64(statement, 0)
        }
        XCTAssertEqual(scalar("SELECT count(*) FROM items"), 1)
        XCTAssertEqual(scalar("SELECT unicode(substr(CAST(secret AS TEXT), 1, 1)) FROM items"), 2, "a guarded blob")
        XCTAssertEqual(
            sqlite3_exec(handle, "UPDATE items SET secret = X'01' || substr(secret, 2)", nil, nil, nil), SQLITE_OK)
        XCTAssertEqual(scalar("SELECT hex(substr(secret, 1, 1)) = '01' FROM items"), 1)
    }
}

/// The device passcode asked for through `pinentry` (a stand-in that answers as told).
final class PasscodePromptTests: EngineTestCase {
    private let passcodeItem = AccessControlPolicy(
        protection: .whenUnlocked, flags: AccessControlPolicy.Flag.devicePasscode)

    private func service(_ pinentry: FakePinentry?) throws -> InProcessKeychainService {
        keychain = nil
        let keychain = try Keychain(
            directory: directory,
            options: KeychainOptions(
                clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1),
                authenticators: .standard(pinentryProgram: pinentry?.path)))
        return InProcessKeychainService(keychain: keychain, client: client)
    }

    private func addAndRead(_ service: InProcessKeychainService, prompt: String? = nil) throws -> ItemResult? {
        var item = password("s", "a")
        item["accc"] = .accessControl(passcodeItem)
        if (try? service.add(item)) == nil { _ = try? service.delete(password("s", "a", secret: nil)) }
        _ = try? service.add(item)
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        if let prompt { query["u_OpPrompt"] = .string(prompt) }
        return try service.copyMatching(query)
    }

    private func code(_ body: () throws -> Any?) -> KeychainError.Code? {
        do {
            _ = try body()
            return nil
        } catch {
            return (error as? KeychainError)?.code
        }
    }

    func testTheRightPasscodeOpensTheItemAndThePromptShowsTheReason() throws {
        let pinentry = try FakePinentry(.passcode("24%68"))
        let service = try service(pinentry)
        try service.setPasscode(SecureBytes(copying: Array("24%68".utf8)), current: nil)
        XCTAssertEqual(try addAndRead(service, prompt: "Read the token\nnow"), .data(Data("secret".utf8)))
        let transcript = pinentry.transcript
        XCTAssertTrue(transcript.contains("SETDESC Read the token%0Anow"), transcript)
        XCTAssertTrue(transcript.contains("GETPIN"), transcript)
        XCTAssertFalse(transcript.contains("24"), "the passcode never goes to the prompt program")
        XCTAssertEqual(try service.status().failedAttempts, 0)
    }

    func testAWrongPasscodeIsCountedACancelIsACancelAndNoProgramFailsClosed() throws {
        let wrong = try FakePinentry(.passcode("0000"))
        var service = try service(wrong)
        try service.setPasscode(SecureBytes(copying: Array("2468".utf8)), current: nil)
        XCTAssertEqual(code { try self.addAndRead(service) }, .authenticationFailed)
        XCTAssertEqual(try service.status().failedAttempts, 1, "a wrong passcode counts as an unlock's does")
        // Each keychain opened anew starts before its first unlock (a reboot): unlocked first.
        let right = SecureBytes(copying: Array("2468".utf8))
        let cancel = try FakePinentry(.cancel)
        service = try self.service(cancel)
        try service.unlock(passcode: right)
        XCTAssertEqual(code { try self.addAndRead(service) }, .userCanceled)
        let vanish = try FakePinentry(.vanish)
        service = try self.service(vanish)
        try service.unlock(passcode: right)
        XCTAssertEqual(code { try self.addAndRead(service) }, .userCanceled)
        service = try self.service(nil)
        try service.unlock(passcode: right)
        XCTAssertEqual(code { try self.addAndRead(service) }, .authenticationFailed)
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        query["u_AuthUI"] = .string("u_AuthUIF")
        XCTAssertEqual(code { try service.copyMatching(query) }, .interactionNotAllowed)
    }

    func testNoPasscodeSetMeansThePasscodeCannotBeAsked() throws {
        let pinentry = try FakePinentry(.passcode("1111"))
        let service = try service(pinentry)
        var item = password("s", "a")
        item["accc"] = .accessControl(passcodeItem)
        XCTAssertEqual(code { try service.add(item) }, .authenticationFailed, "bound to a passcode, and none is set")
        let outcome = try service.authenticate(
            AuthenticationRequest(
                context: AuthenticationContextReference(), subject: .policy(.ownerAuthentication), preflight: true,
                reason: ""))
        XCTAssertEqual(outcome.failure, .passcodeNotSet)
        // Or with biometry, the passcode is an alternative: the item is made, but the passcode not asked.
        _ = try service.biometry(.enroll)
        item["accc"] = .accessControl(
            AccessControlPolicy(
                protection: .whenUnlocked,
                flags: AccessControlPolicy.Flag.devicePasscode | AccessControlPolicy.Flag.biometryAny
                    | AccessControlPolicy.Flag.or))
        _ = try service.add(item)
        _ = try service.biometry(.standingAnswer(.nomatch))
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        XCTAssertEqual(code { try service.copyMatching(query) }, .authenticationFailed)
        XCTAssertEqual(pinentry.transcript, "", "nobody was asked for a passcode")
    }

    func testAContextThatEnteredThePasscodeIsNotAskedAgain() throws {
        let pinentry = try FakePinentry(.passcode("2468"))
        let service = try service(pinentry)
        try service.setPasscode(SecureBytes(copying: Array("2468".utf8)), current: nil)
        let context = AuthenticationContextReference()
        let outcome = try service.authenticate(
            AuthenticationRequest(
                context: context, subject: .policy(.ownerAuthentication), preflight: false, reason: "x"))
        XCTAssertNil(outcome.failure)
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 1)
        var item = password("s", "b")
        item["accc"] = .accessControl(passcodeItem)
        _ = try service.add(item)
        var query = password("s", "b", secret: nil)
        query["r_Data"] = .bool(true)
        query["u_AuthCtx"] = .authenticationContext(context)
        for _ in 0..<2 { XCTAssertEqual(try service.copyMatching(query), .data(Data("secret".utf8))) }
        XCTAssertEqual(pinentry.transcript.components(separatedBy: "GETPIN").count - 1, 1, "asked once in all")
    }

    func testADevicePasscodeItemSurvivesAChangeAndDiesWithTheRemoval() throws {
        let old = try FakePinentry(.passcode("1111"))
        let new = try FakePinentry(.passcode("2222"))
        var service = try service(nil)
        var item = password("s", "a")
        item["accc"] = .accessControl(passcodeItem)
        XCTAssertEqual(code { try service.add(item) }, .authenticationFailed, "no passcode: cannot be bound")
        try service.setPasscode(SecureBytes(copying: Array("1111".utf8)), current: nil)
        service = try self.service(old)
        try service.unlock(passcode: SecureBytes(copying: Array("1111".utf8)))
        XCTAssertEqual(try addAndRead(service), .data(Data("secret".utf8)))
        try service.setPasscode(
            SecureBytes(copying: Array("2222".utf8)), current: SecureBytes(copying: Array("1111".utf8)))
        service = try self.service(new)
        try service.unlock(passcode: SecureBytes(copying: Array("2222".utf8)))
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        XCTAssertEqual(try service.copyMatching(query), .data(Data("secret".utf8)), "a changed passcode keeps it")
        try service.removePasscode(current: SecureBytes(copying: Array("2222".utf8)))
        XCTAssertEqual(code { try service.copyMatching(query) }, .itemNotFound)
        // A new passcode is not the old one's: the item stays gone.
        try service.setPasscode(SecureBytes(copying: Array("2222".utf8)), current: nil)
        XCTAssertEqual(code { try service.copyMatching(query) }, .itemNotFound)
    }

    func testAnEmptyAnswerIsACancelAndAProgramThatStaysIsEnded() throws {
        let pinentry = try FakePinentry(.empty)
        let service = try service(pinentry)
        try service.setPasscode(SecureBytes(copying: Array("2468".utf8)), current: nil)
        XCTAssertEqual(code { try self.addAndRead(service) }, .userCanceled)
        XCTAssertEqual(try service.status().failedAttempts, 0, "an empty passcode is no attempt")
        try pinentry.set(.leaveAtOnce)
        XCTAssertEqual(code { try self.addAndRead(service) }, .userCanceled)
        // A program that answers and then stays, ignoring SIGTERM and its closed input, is killed.
        try pinentry.set(.linger)
        let start = ContinuousClock.now
        XCTAssertEqual(code { try self.addAndRead(service) }, .userCanceled, "an empty answer")
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(10))
        XCTAssertEqual(try childrenNamed("pinentry"), [], "no pinentry is left running")
    }

    /// The pids of this process's children running `name`.
    private func childrenNamed(_ name: String) throws -> [String] {
        let me = getpid()
        return try FileManager.default.contentsOfDirectory(atPath: "/proc").filter { entry in
            guard Int32(entry) != nil, let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8)
            else { return false }
            let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
            let parent = fields.count > 2 ? Int32(fields[1]) : nil
            return parent == me && stat.contains("(\(name))")
        }
    }
}

/// Prompt programs that do not behave: one that cannot reach a person (a terminal pinentry without a
/// terminal), one that prints garbage, one that hangs, one that lies. None opens the item, none is
/// mistaken for the person's answer, and each says why in the log.
final class PinentryFaultTests: EngineTestCase {
    private let passcodeItem = AccessControlPolicy(
        protection: .whenUnlocked, flags: AccessControlPolicy.Flag.devicePasscode)
    private let log = LogLines()

    private func read(with program: String, wait: Duration = .seconds(120)) throws -> (KeychainError.Code?, Int) {
        keychain = nil
        let options = KeychainOptions(
            clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1),
            authenticators: .standard(pinentryProgram: program, passcodePromptWait: wait))
        let service = InProcessKeychainService(
            keychain: try Keychain(directory: directory, options: options), client: client)
        if try service.status().lockState == .noPasscode {
            try service.setPasscode(SecureBytes(copying: Array("2468".utf8)), current: nil)
        } else {
            try service.unlock(passcode: SecureBytes(copying: Array("2468".utf8)))
        }
        var item = password("s", "a")
        item["accc"] = .accessControl(passcodeItem)
        _ = try? service.add(item)
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        let failures = { try service.status().failedAttempts }
        do {
            _ = try service.copyMatching(query)
            return (nil, try failures())
        } catch let error as KeychainError {
            return (error.code, try failures())
        }
    }

    private func script(_ body: String) throws -> String {
        let path = directory + "-pinentry-" + UUID().uuidString.prefix(6)
        try ("#!/bin/sh\n" + body).write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return path
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        let log = self.log
        KeychainLog.setSink { line in log.lines.withLock { $0.append(line) } }
    }

    func testATerminalPinentryWithoutATerminalIsACancelAndSaysWhy() throws {
        let program = "/usr/bin/pinentry-curses"
        guard FileManager.default.isExecutableFile(atPath: program) else {
            throw XCTSkip("pinentry-curses is not installed")
        }
        let (code, failures) = try read(with: program)
        XCTAssertEqual(code, .userCanceled)
        XCTAssertEqual(failures, 0)
        let lines = log.lines.withLock { $0 }
        XCTAssertTrue(
            lines.contains { $0.contains("could not ask anyone") }, "\(lines)")
    }

    func testAPinentryThatPrintsGarbageFailsWithoutCountingAnAttempt() throws {
        let program = try script("echo 'OK hello'\nwhile read -r line; do printf 'D %%zz\\nOK\\n'; done\n")
        let (code, failures) = try read(with: program)
        XCTAssertEqual(code, .authenticationFailed)
        XCTAssertEqual(failures, 0, "garbage is not a passcode attempt")
        XCTAssertTrue(log.lines.withLock { $0 }.contains { $0.contains("did not answer as pinentry's protocol") })
        let noGreeting = try script("echo 'hello there'\nsleep 1\n")
        XCTAssertEqual(try read(with: noGreeting).0, .authenticationFailed)
    }

    func testAPinentryThatHangsIsACancelAfterItsWait() throws {
        let program = try script(
            "echo 'OK hello'\nwhile read -r line; do case \"$line\" in GETPIN) sleep 30 ;; *) echo OK ;; esac; done\n")
        let started = ContinuousClock.now
        let (code, failures) = try read(with: program, wait: .seconds(1))
        XCTAssertEqual(code, .userCanceled)
        XCTAssertEqual(failures, 0)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(15), "the prompt was not given up after its wait")
        XCTAssertTrue(log.lines.withLock { $0 }.contains { $0.contains("without an answer") })
    }

    func testAPinentryThatLiesIsAWrongPasscodeCounted() throws {
        let program = try script(
            "echo 'OK hello'\nwhile read -r line; do case \"$line\" in GETPIN) printf 'D 0000\\nOK\\n' ;; *) echo OK ;; esac; done\n"
        )
        let (code, failures) = try read(with: program)
        XCTAssertEqual(code, .authenticationFailed)
        XCTAssertEqual(failures, 1)
    }
}

/// What the keychain logged during a test.
final class LogLines: Sendable {
    let lines = Mutex<[String]>([])
}
