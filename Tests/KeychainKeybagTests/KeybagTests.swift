import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainSystem
import Synchronization
import XCTest

@testable import KeychainKeybag

/// A clock the test moves by hand. The wall clock can be shifted alone (as a user or a doctored process
/// would), and the machine rebooted (a new boot, its clock since boot from zero).
final class ManualClock: KeychainClock, @unchecked Sendable {
    private struct Readings {
        var elapsed: TimeInterval = 0
        var wallShift: TimeInterval = 0
        var boot = Data(repeating: 7, count: 16)
        var bootedAt: TimeInterval = 0
        var bootShift: TimeInterval = 0
    }
    private let readings = Mutex(Readings())

    func now() -> Date {
        readings.withLock { Date(timeIntervalSince1970: 1_800_000_000 + $0.elapsed + $0.wallShift) }
    }
    func advance(_ seconds: TimeInterval) { readings.withLock { $0.elapsed += seconds } }
    func shiftWallClock(_ seconds: TimeInterval) { readings.withLock { $0.wallShift += seconds } }
    /// Moves the clock since boot alone (a time namespace's offset).
    func shiftBootClock(_ seconds: TimeInterval) { readings.withLock { $0.bootShift += seconds } }
    func reboot() {
        readings.withLock {
            $0.boot = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
            $0.bootedAt = $0.elapsed
        }
    }
    func sinceBoot() -> BootInstant {
        readings.withLock {
            BootInstant(boot: $0.boot, nanoseconds: UInt64(max($0.elapsed - $0.bootedAt + $0.bootShift, 0) * 1e9))
        }
    }
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
        try Keybag(
            directory: directory, root: root ?? self.root(), clock: clock,
            passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
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

    func testCalibrationNeverGoesBelowTheMinimum() {
        // However fast or loaded the machine, the cost is at least OWASP's minimum for scrypt.
        guard case .scrypt(let logN, let r, let p) = PasscodeFunction.calibrated(target: 0.000_001) else {
            return XCTFail("scrypt expected")
        }
        XCTAssertEqual(PasscodeFunction.minimum, .scrypt(logN: 15, r: 8, p: 3))
        XCTAssertEqual([Int(logN), Int(r), Int(p)], [15, 8, 3])
        guard case .scrypt(let slowLogN, _, _) = PasscodeFunction.calibrated(target: 10) else { return XCTFail() }
        XCTAssertGreaterThan(slowLogN, 15, "a target above the minimum's cost buys more memory")
    }

    // MARK: Attacks on the attempt counter

    func testAttemptIsOnDiskBeforeThePasscodeIsChecked() throws {
        let spy = try SpyRoot(root(), keybagPath: directory + "/keybag")
        let bag = try Keybag(
            directory: directory, root: spy, clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
        try bag.setPasscode("1234", current: nil)
        XCTAssertThrowsError(try bag.unlock(passcode: "0000"))
        XCTAssertThrowsError(try bag.unlock(passcode: "9999"))
        try bag.unlock(passcode: "1234")
        // What the disk said while each passcode was being derived, right or wrong.
        XCTAssertEqual(spy.countsOnDiskWhileDeriving.suffix(3), [1, 2, 3])
        XCTAssertEqual(bag.status.failedAttempts, 0, "a right passcode clears the count afterwards")
    }

    func testAttemptCutShortCountsAndAnUnfinishedTenthErases() throws {
        let spy = try SpyRoot(root(), keybagPath: directory + "/keybag")
        let bag = try Keybag(
            directory: directory, root: spy, clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1))
        try bag.setPasscode("1234", current: nil)
        try bag.setWipeAfterFailures(true, passcode: "1234")
        for _ in 1...9 {
            XCTAssertThrowsError(try bag.unlock(passcode: "0000"))
            clock.advance(3600)
        }
        // The tenth guess dies between being counted and being answered (a killed process).
        spy.interruptDerivation = true
        XCTAssertThrowsError(try bag.unlock(passcode: "1234"))
        spy.interruptDerivation = false
        XCTAssertEqual(bag.status.failedAttempts, 10)
        clock.advance(3600)
        XCTAssertThrowsError(try bag.unlock(passcode: "1234")) { XCTAssertEqual($0 as? KeybagError, .wiped) }
        XCTAssertEqual(bag.status.lockState, .noPasscode)
    }

    func testWallClockChangesNeitherSkipNorStretchTheDelay() throws {
        let bag = try keybag()
        try bag.setPasscode("1234", current: nil)
        for _ in 1...5 { XCTAssertThrowsError(try bag.unlock(passcode: "0000")) }
        // A year ahead: the delay still runs (the clock since boot says no time passed), and is not a
        // year long.
        clock.shiftWallClock(365 * 86400)
        XCTAssertThrowsError(try bag.unlock(passcode: "1234")) {
            guard case KeybagError.attemptsThrottled(let retryAt)? = $0 as? KeybagError else { return XCTFail("\($0)") }
            XCTAssertEqual(retryAt.timeIntervalSince(self.clock.now()), 60, accuracy: 0.001)
        }
        // Two years back, earlier than the attempt: the delay starts over from the next attempt, once,
        // and is no longer than the schedule says.
        clock.shiftWallClock(-2 * 365 * 86400)
        XCTAssertEqual(bag.status.nextAttemptAllowed?.timeIntervalSince(clock.now()) ?? 0, 60, accuracy: 0.001)
        XCTAssertThrowsError(try bag.unlock(passcode: "1234"))
        clock.advance(59)
        XCTAssertThrowsError(try bag.unlock(passcode: "1234"))
        clock.advance(1)
        XCTAssertNoThrow(try bag.unlock(passcode: "1234"))
    }

    /// Any user can run the command in a time namespace whose clock since boot is hours ahead: that
    /// clock alone must not end a delay, nor lock the owner out once the namespace is gone.
    func testTheClockSinceBootAloneNeitherSkipsNorStretchesTheDelay() throws {
        let bag = try keybag()
        try bag.setPasscode("1234", current: nil)
        for _ in 1...5 { XCTAssertThrowsError(try bag.unlock(passcode: "0000")) }
        clock.shiftBootClock(4000)
        XCTAssertThrowsError(try bag.unlock(passcode: "1234")) {
            guard case KeybagError.attemptsThrottled? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
        // The sixth guess made with the clock since boot far ahead, then the namespace is left.
        clock.advance(60)
        XCTAssertThrowsError(try bag.unlock(passcode: "0000"))
        clock.shiftBootClock(-4000)
        XCTAssertEqual(bag.status.nextAttemptAllowed?.timeIntervalSince(clock.now()) ?? 0, 300, accuracy: 0.001)
        XCTAssertThrowsError(try bag.unlock(passcode: "1234"), "the delay starts over from here, once")
        clock.advance(300)
        XCTAssertNoThrow(try bag.unlock(passcode: "1234"))
    }

    func testARebootDoesNotSkipTheDelay() throws {
        let bag = try keybag()
        try bag.setPasscode("1234", current: nil)
        for _ in 1...5 { XCTAssertThrowsError(try bag.unlock(passcode: "0000")) }
        clock.advance(30)
        clock.reboot()
        // Across the reboot the wall clock alone measures the time: thirty seconds are left.
        XCTAssertThrowsError(try bag.unlock(passcode: "1234")) {
            guard case KeybagError.attemptsThrottled(let retryAt)? = $0 as? KeybagError else { return XCTFail("\($0)") }
            XCTAssertEqual(retryAt.timeIntervalSince(self.clock.now()), 30, accuracy: 0.001)
        }
        clock.advance(29)
        XCTAssertThrowsError(try bag.unlock(passcode: "1234"))
        clock.advance(1)
        XCTAssertNoThrow(try bag.unlock(passcode: "1234"))
    }

    func testEraseDeletesTheItemsBeforeItReplacesTheKeybag() throws {
        let path = directory + "/keybag"
        let root = try root()
        let sawOldKeybag = Mutex<[Bool]>([])
        let failDeletion = Mutex(false)
        let bag = try Keybag(
            directory: directory, root: root, clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1),
            deleteItems: {
                let file = try KeybagFile.decode(Data(contentsOf: URL(fileURLWithPath: path)), root: root)
                sawOldKeybag.withLock { $0.append(file.passcode != nil) }
                if failDeletion.withLock({ $0 }) { throw KeybagError.io("the database cannot be written") }
            })
        try bag.setPasscode("1234", current: nil)
        try bag.setWipeAfterFailures(true, passcode: "1234")
        for _ in 1...9 {
            XCTAssertThrowsError(try bag.unlock(passcode: "0000"))
            clock.advance(3600)
        }
        failDeletion.withLock { $0 = true }
        XCTAssertThrowsError(try bag.unlock(passcode: "0000")) {
            guard case KeybagError.wipedLeavingItems? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(sawOldKeybag.withLock { $0 }, [true], "items go first, while the old keybag is in place")
        XCTAssertEqual(bag.status.lockState, .noPasscode, "and the keybag is erased even when they could not")
    }

    func testKeybagFromBeforeScryptOpensAndMovesToScrypt() throws {
        let root = try root()
        let bag = try keybag(root: root)
        try bag.setPasscode("1234", current: nil)
        // Rewrite the file as the previous format had it: PBKDF2, a wall-clock failure time.
        var file = try KeybagFile.decode(Data(contentsOf: URL(fileURLWithPath: directory + "/keybag")), root: root)
        let salt = file.passcode?.salt ?? Data()
        let stretched = try KeyDerivation.pbkdf2(
            password: SecureBytes(copying: Array("1234".utf8)), salt: salt, iterations: 1_000)
        let passcodeKey = try root.entangle(stretched, binding: Data(), generation: 0)
        let classA = try bag.classKey(for: .whenUnlocked)
        let indexKey = bag.indexKey
        // Before format 3 the root wrapped the keys outside the passcode itself.
        for (protectionClass, wrapped) in file.classKeys {
            let key = protectionClass == .whenUnlocked ? classA : try bag.classKey(for: protectionClass)
            let context = KeybagFile.context(
                keybag: file.identifier, protectionClass: protectionClass, passcodeProtected: wrapped.passcodeProtected)
            file.classKeys[protectionClass]?.blob =
                wrapped.passcodeProtected
                ? try AESGCM.seal(key, key: passcodeKey, authenticating: context)
                : try root.wrap(key, context: context)
        }
        file.indexKey = try root.wrap(indexKey, context: KeybagFile.indexKeyContext(keybag: file.identifier))
        var writer = ByteWriter()
        writer.writeRaw(KeybagFile.magic)
        writer.write(UInt8(1))
        writer.writeRaw(file.identifier)
        writer.writeRaw(file.deviceIdentifier)
        writer.write(UInt8(1))
        writer.writeBytes(salt)
        writer.write(UInt32(1_000))
        writer.write(UInt32(0))
        writer.write(Double(0))
        writer.write(UInt8(0))
        let classes = file.classKeys.keys.sorted { $0.rawValue < $1.rawValue }
        writer.write(UInt8(classes.count))
        for protectionClass in classes {
            writer.write(UInt8(protectionClass.rawValue))
            writer.write(UInt8(file.classKeys[protectionClass]!.passcodeProtected ? 1 : 0))
            writer.writeBytes(file.classKeys[protectionClass]!.blob)
        }
        writer.writeBytes(file.indexKey)
        try (writer.data + root.authenticate(writer.data)).write(to: URL(fileURLWithPath: directory + "/keybag"))

        let old = try keybag(root: root)
        XCTAssertEqual(old.status.lockState, .beforeFirstUnlock)
        XCTAssertTrue(old.indexKey.constantTimeEquals(indexKey))
        XCTAssertTrue(try old.classKey(for: .always).constantTimeEquals(bag.classKey(for: .always)))
        let opened = try KeybagFile.decode(Data(contentsOf: URL(fileURLWithPath: directory + "/keybag")), root: root)
        XCTAssertFalse(opened.isLegacy, "opening a keybag of format 1 upgrades it to a keybag secret")
        XCTAssertThrowsError(try old.unlock(passcode: "0000"))
        try old.unlock(passcode: "1234")
        XCTAssertTrue(try old.classKey(for: .whenUnlocked).constantTimeEquals(classA))
        let upgraded = try KeybagFile.decode(Data(contentsOf: URL(fileURLWithPath: directory + "/keybag")), root: root)
        XCTAssertEqual(upgraded.passcode?.function, .scrypt(logN: 4, r: 1, p: 1))
        let again = try keybag(root: root)
        try again.unlock(passcode: "1234")
        XCTAssertTrue(try again.classKey(for: .whenUnlocked).constantTimeEquals(classA))
    }
}

/// A device root that reports, at the moment a passcode key is entangled (right after the passcode was
/// derived, before it is checked), what the keybag on disk counts; and that can fail there, as a
/// process killed at that moment would.
final class SpyRoot: DeviceRoot, @unchecked Sendable {
    private let inner: SoftwareDeviceRoot
    private let keybagPath: String
    private let lock = NSLock()
    private var counts: [UInt32] = []
    private var interrupt = false

    init(_ inner: SoftwareDeviceRoot, keybagPath: String) throws {
        self.inner = inner
        self.keybagPath = keybagPath
    }

    var countsOnDiskWhileDeriving: [UInt32] { lock.withLock { counts } }
    var interruptDerivation: Bool {
        get { lock.withLock { interrupt } }
        set { lock.withLock { interrupt = newValue } }
    }

    var deviceIdentifier: Data { inner.deviceIdentifier }
    func wrap(_ key: SecureBytes, context: Data) throws -> Data { try inner.wrap(key, context: context) }
    func unwrap(_ wrapped: Data, context: Data) throws -> SecureBytes { try inner.unwrap(wrapped, context: context) }
    func authenticate(_ data: Data) throws -> Data { try inner.authenticate(data) }
    var summary: String { inner.summary }
    var anchor: (any KeybagAnchor)? { nil }
    func retire() throws {}
    func sealKeybagSecret(_ secret: SecureBytes, generation: UInt64) throws -> Data {
        try inner.sealKeybagSecret(secret, generation: generation)
    }
    func openKeybagSecret(_ sealed: Data, generation: UInt64) throws -> SecureBytes {
        try inner.openKeybagSecret(sealed, generation: generation)
    }
    func bindPasscode(_ passcodeKey: SecureBytes, generation: UInt64) throws -> PasscodeBinding {
        try inner.bindPasscode(passcodeKey, generation: generation)
    }

    func entangle(_ passcodeKey: SecureBytes, binding: Data, generation: UInt64) throws -> SecureBytes {
        if let contents = FileManager.default.contents(atPath: keybagPath),
            let file = try? KeybagFile.decode(contents, root: inner)
        {
            lock.withLock { counts.append(file.failedAttempts) }
        }
        if interruptDerivation { throw KeybagError.io("interrupted") }
        return try inner.entangle(passcodeKey, binding: binding, generation: generation)
    }
}

extension Keybag {
    // Passcodes as strings, for brevity in these tests.
    func unlock(passcode: String) throws { try unlock(passcode: SecureBytes(copying: passcode.utf8)) }

    func setPasscode(_ newPasscode: String, current: String?) throws {
        try setPasscode(SecureBytes(copying: newPasscode.utf8), current: current.map { SecureBytes(copying: $0.utf8) })
    }

    func removePasscode(current: String) throws {
        try removePasscode(current: SecureBytes(copying: current.utf8))
    }

    func setWipeAfterFailures(_ enabled: Bool, passcode: String?) throws {
        try setWipeAfterFailures(enabled, passcode: passcode.map { SecureBytes(copying: $0.utf8) })
    }
}
