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

    /// A prompt answered by the sensor's standing answer changes nothing in its state, so the state file
    /// is not written again (a write and a sync of the disk on every prompt); a queued answer is taken,
    /// and that is written.
    func testAStandingAnswerLeavesTheSensorFileAsItWas() throws {
        let service = try service(nil)
        _ = try service.biometry(.enroll)
        _ = try service.biometry(.standingAnswer(.match))
        var item = password("s", "guarded")
        item["accc"] = .accessControl(
            AccessControlPolicy(protection: .whenUnlocked, flags: AccessControlPolicy.Flag.biometryAny))
        _ = try service.add(item)
        var query = password("s", "guarded", secret: nil)
        query["r_Data"] = .bool(true)
        // The inode and the change time to the nanosecond: a rewrite renames a new file into place.
        func fileIdentity() throws -> [UInt64] {
            var info = stat()
            guard stat(directory + "/biometry", &info) == 0 else { throw CocoaError(.fileNoSuchFile) }
            return [UInt64(info.st_ino), UInt64(info.st_ctim.tv_sec), UInt64(info.st_ctim.tv_nsec)]
        }
        let before = try fileIdentity()
        for _ in 0..<3 { XCTAssertNotNil(try service.copyMatching(query), "the standing answer matches") }
        XCTAssertEqual(try fileIdentity(), before, "no prompt rewrote the sensor's state")
        _ = try service.biometry(.answer(.nomatch))
        XCTAssertEqual(code { try service.copyMatching(query) }, .authenticationFailed, "the queued answer first")
        XCTAssertNotEqual(try fileIdentity(), before, "taking a queued answer is written")
        XCTAssertEqual(try service.biometry(.status).pendingAnswers, [])
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
