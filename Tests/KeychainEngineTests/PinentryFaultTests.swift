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
