import Foundation
import KeychainCrypto
import KeychainKeybag
import Synchronization
import XCTest

/// A clock the test moves by hand.
final class ManualClock: Clock, @unchecked Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    func now() -> Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

final class KeybagTests: XCTestCase {
    private var directory: String!
    private let clock = ManualClock()

    override func setUp() {
        directory = NSTemporaryDirectory() + "keybag-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    private func root(_ name: String = "root") throws -> SoftwareDeviceRoot {
        try SoftwareDeviceRoot.load(path: directory + "/" + name, create: true)
    }

    private func keybag(root: SoftwareDeviceRoot? = nil) throws -> Keybag {
        try Keybag(directory: directory, root: root ?? self.root(), clock: clock, passcodeIterations: 1_000)
    }

    private func availability(_ bag: Keybag) -> [ProtectionClass: Bool] {
        Dictionary(uniqueKeysWithValues: ProtectionClass.allCases.map { ($0, (try? bag.classKey(for: $0)) != nil) })
    }

    func testNoPasscodeEverythingButPasscodeClassAvailable() throws {
        let bag = try keybag()
        XCTAssertEqual(bag.status.lockState, .noPasscode)
        for (protectionClass, available) in availability(bag) {
            XCTAssertEqual(available, protectionClass != .whenPasscodeSetThisDeviceOnly, "\(protectionClass)")
        }
        XCTAssertThrowsError(try bag.classKey(for: .whenPasscodeSetThisDeviceOnly)) {
            XCTAssertEqual($0 as? KeybagError, .classUnavailable(.whenPasscodeSetThisDeviceOnly))
        }
        bag.lock()
        XCTAssertEqual(bag.status.lockState, .noPasscode, "without a passcode there is nothing to lock")
        XCTAssertNoThrow(try bag.classKey(for: .whenUnlocked))
    }

    func testLockStatesWithPasscode() throws {
        let bag = try keybag()
        let classAKeyBefore = try bag.classKey(for: .whenUnlocked)
        try bag.setPasscode("1234", current: nil)
        XCTAssertEqual(bag.status.lockState, .unlocked)
        XCTAssertTrue(availability(bag).values.allSatisfy { $0 })

        bag.lock()
        XCTAssertEqual(bag.status.lockState, .locked)
        let locked = availability(bag)
        for protectionClass in ProtectionClass.allCases {
            XCTAssertEqual(locked[protectionClass], protectionClass.tier != .whenUnlocked, "\(protectionClass)")
        }
        XCTAssertThrowsError(try bag.classKey(for: .whenUnlocked)) {
            XCTAssertEqual($0 as? KeybagError, .locked(.whenUnlocked))
        }

        bag.restart()
        XCTAssertEqual(bag.status.lockState, .beforeFirstUnlock)
        let beforeFirst = availability(bag)
        for protectionClass in ProtectionClass.allCases {
            XCTAssertEqual(beforeFirst[protectionClass], protectionClass.tier == .always, "\(protectionClass)")
        }

        try bag.unlock(passcode: "1234")
        XCTAssertEqual(bag.status.lockState, .unlocked)
        // Setting a passcode re-wraps the class keys; it does not replace them.
        XCTAssertTrue(try bag.classKey(for: .whenUnlocked).constantTimeEquals(classAKeyBefore))
    }

    func testNewProcessStartsBeforeFirstUnlock() throws {
        try keybag().setPasscode("1234", current: nil)
        let second = try keybag()
        XCTAssertEqual(second.status.lockState, .beforeFirstUnlock)
        XCTAssertThrowsError(try second.classKey(for: .afterFirstUnlock))
        XCTAssertNoThrow(try second.classKey(for: .always))
        try second.unlock(passcode: "1234")
        XCTAssertNoThrow(try second.classKey(for: .whenPasscodeSetThisDeviceOnly))
    }

    func testChangeAndRemovePasscode() throws {
        let bag = try keybag()
        try bag.setPasscode("1111", current: nil)
        XCTAssertThrowsError(try bag.setPasscode("2222", current: nil)) {
            XCTAssertEqual($0 as? KeybagError, .passcodeRequired)
        }
        XCTAssertThrowsError(try bag.setPasscode("2222", current: "9999")) {
            XCTAssertEqual($0 as? KeybagError, .wrongPasscode(failedAttempts: 1))
        }
        try bag.setPasscode("2222", current: "1111")
        let fresh = try keybag()
        XCTAssertThrowsError(try fresh.unlock(passcode: "1111"))
        try fresh.unlock(passcode: "2222")
        XCTAssertEqual(fresh.status.failedAttempts, 0, "success resets the counter")

        let passcodeClassKey = try fresh.classKey(for: .whenPasscodeSetThisDeviceOnly)
        try fresh.removePasscode(current: "2222")
        XCTAssertEqual(fresh.status.lockState, .noPasscode)
        XCTAssertThrowsError(try fresh.classKey(for: .whenPasscodeSetThisDeviceOnly))
        // A new passcode makes a new passcode class key: the old items stay unreadable.
        try fresh.setPasscode("3333", current: nil)
        XCTAssertFalse(try fresh.classKey(for: .whenPasscodeSetThisDeviceOnly).constantTimeEquals(passcodeClassKey))
        XCTAssertThrowsError(try fresh.setPasscode("", current: "3333")) {
            XCTAssertEqual($0 as? KeybagError, .emptyPasscode)
        }
    }

    func testEscalatingDelaysSurviveRestart() throws {
        let bag = try keybag()
        try bag.setPasscode("1234", current: nil)
        bag.restart()
        for attempt in 1...4 {
            XCTAssertThrowsError(try bag.unlock(passcode: "0000")) {
                XCTAssertEqual($0 as? KeybagError, .wrongPasscode(failedAttempts: attempt))
            }
            XCTAssertNil(bag.status.nextAttemptAllowed, "no delay after \(attempt) failures")
        }
        XCTAssertThrowsError(try bag.unlock(passcode: "0000"))  // fifth: one minute
        XCTAssertEqual(bag.status.nextAttemptAllowed, clock.now().addingTimeInterval(60))

        // A new process (a restart) sees the same counter and delay.
        let restarted = try keybag()
        XCTAssertEqual(restarted.status.failedAttempts, 5)
        XCTAssertThrowsError(try restarted.unlock(passcode: "1234")) {
            guard case KeybagError.attemptsThrottled(let retryAt)? = $0 as? KeybagError else { return XCTFail("\($0)") }
            XCTAssertEqual(retryAt, self.clock.now().addingTimeInterval(60))
        }
        let expectations: [(Int, TimeInterval)] = [(6, 300), (7, 900), (8, 900), (9, 3600), (10, 3600), (11, 3600)]
        var waited: TimeInterval = 60
        for (failures, delay) in expectations {
            clock.advance(waited)
            XCTAssertThrowsError(try restarted.unlock(passcode: "0000")) {
                XCTAssertEqual($0 as? KeybagError, .wrongPasscode(failedAttempts: failures))
            }
            XCTAssertEqual(PasscodePolicy.delay(afterFailures: failures), delay)
            XCTAssertEqual(restarted.status.nextAttemptAllowed, clock.now().addingTimeInterval(delay))
            waited = delay
        }
        clock.advance(waited - 1)
        XCTAssertThrowsError(try restarted.unlock(passcode: "1234"), "one second early is still refused")
        clock.advance(1)
        try restarted.unlock(passcode: "1234")
        XCTAssertEqual(restarted.status.failedAttempts, 0)
    }

    func testOptionalWipeAfterTenFailures() throws {
        let bag = try keybag()
        try bag.setPasscode("1234", current: nil)
        try bag.setWipeAfterFailures(true, passcode: "1234")
        let oldClassKey = try bag.classKey(for: .always)
        for attempt in 1...9 {
            XCTAssertThrowsError(try bag.unlock(passcode: "0000")) {
                XCTAssertEqual($0 as? KeybagError, .wrongPasscode(failedAttempts: attempt))
            }
            clock.advance(3600)
        }
        XCTAssertThrowsError(try bag.unlock(passcode: "0000")) { XCTAssertEqual($0 as? KeybagError, .wiped) }
        XCTAssertEqual(bag.status.lockState, .noPasscode)
        XCTAssertFalse(try bag.classKey(for: .always).constantTimeEquals(oldClassKey), "every class key is new")
        XCTAssertEqual(try keybag().status.failedAttempts, 0)
    }

    func testKeybagFromAnotherDeviceIsRefusedAndLeftUntouched() throws {
        _ = try keybag()
        let path = directory + "/keybag"
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try keybag(root: root("other-root"))) {
            guard case KeybagError.foreignDevice? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), before)
    }

    func testDamagedKeybagIsReportedAsCorrupt() throws {
        _ = try keybag()
        let path = directory + "/keybag"
        var contents = try Data(contentsOf: URL(fileURLWithPath: path))
        contents[contents.count / 2] ^= 0x40
        try contents.write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try keybag()) {
            guard case KeybagError.corrupt? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
        try contents.prefix(10).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try keybag()) {
            guard case KeybagError.corrupt? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
    }

    func testFilesArePrivate() throws {
        let bag = try keybag()
        try bag.setPasscode("1234", current: nil)
        XCTAssertEqual(SecureFiles.permissions(of: directory + "/keybag"), 0o600)
        XCTAssertEqual(SecureFiles.permissions(of: directory + "/root"), 0o600)
        let nested = directory + "/a/b/keychain"
        try SecureFiles.ensureDirectory(nested)
        XCTAssertEqual(SecureFiles.permissions(of: nested), 0o700)
    }

    func testPasscodeChangeInOneProcessIsSeenByAnother() throws {
        let first = try keybag()
        let second = try keybag()
        try first.setPasscode("1234", current: nil)
        try second.refreshIfChanged()
        XCTAssertEqual(second.status.lockState, .unlocked, "keys held stay valid: a passcode re-wraps, not replaces")
        try first.removePasscode(current: "1234")
        try second.refreshIfChanged()
        XCTAssertEqual(second.status.lockState, .noPasscode)
        XCTAssertThrowsError(try second.classKey(for: .whenPasscodeSetThisDeviceOnly))
    }

    func testCalibratedIterationsAreSubstantial() {
        XCTAssertGreaterThanOrEqual(Keybag.calibratedIterations(), 50_000)
    }
}
