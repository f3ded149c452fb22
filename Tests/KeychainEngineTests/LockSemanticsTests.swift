import Foundation
import KeychainAuthenticators
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag
import KeychainSystem
import KeychainTestSupport
import XCTest

@testable import KeychainEngine

/// Protection classes against the lock state, driven through the state API.
final class LockSemanticsTests: EngineTestCase {
    private let classes = ["ak", "ck", "dk", "aku", "cku", "dku", "akpu"]

    private func addOneOfEach() throws {
        for protection in classes {
            _ = try keychain.add(
                password("lock", protection, secret: "s-\(protection)", protection: protection), client: client)
        }
    }

    private func readable(_ protection: String) -> Result<String?, KeychainError> {
        Result { try readSecret("lock", protection) }.mapError { $0 as? KeychainError ?? .internalError("\($0)") }
    }

    func testWithoutPasscodeEverythingIsAvailableButThePasscodeClass() throws {
        XCTAssertEqual(keychain.status.lockState, .noPasscode)
        assertError(.notAvailable("")) {
            _ = try keychain.add(password("lock", "akpu", protection: "akpu"), client: client)
        }
        for protection in classes where protection != "akpu" {
            _ = try keychain.add(password("lock", protection, protection: protection), client: client)
            XCTAssertEqual(try readSecret("lock", protection), "secret")
        }
        keychain.lock()
        XCTAssertEqual(try readSecret("lock", "ak"), "secret", "lock does nothing without a passcode")
    }

    func testLockedDeviceDeniesClassAOnly() throws {
        try keychain.setPasscode("1234", current: nil)
        try addOneOfEach()
        keychain.lock()
        XCTAssertEqual(keychain.status.lockState, .locked)
        for protection in classes {
            let outcome = readable(protection)
            if ["ak", "aku", "akpu"].contains(protection) {
                XCTAssertEqual(outcome.failureCode, "interactionNotAllowed", protection)
            } else {
                XCTAssertEqual(try outcome.get(), "s-\(protection)", protection)
            }
        }
        // Adding class A while locked fails, even when it would be a duplicate.
        assertError(.interactionNotAllowed("")) {
            _ = try keychain.add(password("lock", "ak", protection: "ak"), client: client)
        }
        assertError(.interactionNotAllowed("")) {
            _ = try keychain.add(password("lock", "new", protection: "aku"), client: client)
        }
        XCTAssertNoThrow(try keychain.add(password("lock", "new-ck", protection: "ck"), client: client))
        // Updating or deleting a class-A item needs its key too.
        assertError(.interactionNotAllowed("")) {
            try keychain.update(password("lock", "ak", secret: nil), attributes: ["labl": .string("x")], client: client)
        }
        assertError(.interactionNotAllowed("")) {
            try keychain.delete(password("lock", "aku", secret: nil), client: client)
        }
        // Class C attributes stay listable while locked.
        let attributes = try keychain.copyMatching(
            ["class": .string("genp"), "acct": .string("ck"), "r_Attributes": .bool(true)], client: client)
        guard case .dictionary(let dictionary)? = attributes else { return XCTFail("no attributes") }
        XCTAssertEqual(dictionary["pdmn"], .string("ck"))

        try keychain.unlock(passcode: "1234")
        for protection in classes { XCTAssertEqual(try readable(protection).get(), "s-\(protection)") }
    }

    func testLockedFirstRowFailsTheWholeSearch() throws {
        try keychain.setPasscode("1234", current: nil)
        _ = try keychain.add(password("mixed", "a-locked", protection: "ak"), client: client)
        _ = try keychain.add(password("mixed", "b-open", protection: "dk"), client: client)
        keychain.lock()
        let query: [String: ItemValue] = [
            "class": .string("genp"), "svce": .string("mixed"), "m_Limit": .string("m_LimitAll"), "r_Data": .bool(true),
        ]
        assertError(.interactionNotAllowed("")) { _ = try keychain.copyMatching(query, client: client) }
    }

    func testBeforeFirstUnlockOnlyClassD() throws {
        try keychain.setPasscode("1234", current: nil)
        try addOneOfEach()
        keychain.restart()
        XCTAssertEqual(keychain.status.lockState, .beforeFirstUnlock)
        for protection in classes {
            let outcome = readable(protection)
            if protection.hasPrefix("d") {
                XCTAssertEqual(try outcome.get(), "s-\(protection)")
            } else {
                XCTAssertEqual(outcome.failureCode, "interactionNotAllowed", protection)
            }
        }
        // Another process starts in the same state and unlocks on its own.
        let second = try open()
        XCTAssertEqual(second.status.lockState, .beforeFirstUnlock)
        assertError(.authenticationFailed("")) { try second.unlock(passcode: "0000") }
        try second.unlock(passcode: "1234")
        XCTAssertEqual(try readSecret("lock", "akpu", in: second), "s-akpu")
        XCTAssertEqual(keychain.status.lockState, .beforeFirstUnlock, "an unlock lasts for its own process")
    }

    func testRemovingThePasscodeDestroysPasscodeClassItems() throws {
        try keychain.setPasscode("1234", current: nil)
        try addOneOfEach()
        try keychain.removePasscode(current: "1234")
        XCTAssertEqual(keychain.status.lockState, .noPasscode)
        assertError(.itemNotFound) { _ = try readSecret("lock", "akpu") }
        for protection in classes where protection != "akpu" {
            XCTAssertEqual(try readSecret("lock", protection), "s-\(protection)")
        }
        try keychain.setPasscode("5678", current: nil)
        assertError(.itemNotFound) { _ = try readSecret("lock", "akpu") }
        // The slot is free again for a new item.
        XCTAssertNoThrow(try keychain.add(password("lock", "akpu", protection: "akpu"), client: client))
    }

    func testPasscodeChangeKeepsItemsAndDelaysApply() throws {
        try keychain.setPasscode("1111", current: nil)
        try addOneOfEach()
        try keychain.setPasscode("2222", current: "1111")
        keychain.restart()
        for _ in 1...5 { assertError(.authenticationFailed("")) { try keychain.unlock(passcode: "1111") } }
        XCTAssertEqual(keychain.status.failedAttempts, 5)
        XCTAssertEqual(keychain.status.nextAttemptAllowed, clock.now().addingTimeInterval(60))
        assertError(.interactionNotAllowed("")) { try keychain.unlock(passcode: "2222") }
        clock.advance(60)
        try keychain.unlock(passcode: "2222")
        XCTAssertEqual(try readSecret("lock", "akpu"), "s-akpu")
    }

    func testEraseAfterTenFailuresDeletesEverything() throws {
        try keychain.setPasscode("1234", current: nil)
        try keychain.setEraseAfterFailedAttempts(true, passcode: "1234")
        try addOneOfEach()
        keychain.restart()
        for _ in 1...9 {
            assertError(.authenticationFailed("")) { try keychain.unlock(passcode: "0000") }
            clock.advance(3600)
        }
        assertError(.authenticationFailed("")) { try keychain.unlock(passcode: "0000") }
        XCTAssertEqual(keychain.status.lockState, .noPasscode)
        for protection in classes { XCTAssertEqual(readable(protection).failureCode, "itemNotFound") }
        XCTAssertNoThrow(try keychain.add(password("after", "wipe"), client: client))
        XCTAssertEqual(try readSecret("after", "wipe"), "secret")
    }

    /// The review put an earlier keybag back after the erase: the rows must be gone with the keys, so
    /// the old class keys find nothing to open.
    func testRollingTheKeybagBackAfterAnEraseBringsNothingBack() throws {
        try keychain.setPasscode("1234", current: nil)
        try keychain.setEraseAfterFailedAttempts(true, passcode: "1234")
        try addOneOfEach()
        let keybag = URL(fileURLWithPath: directory + "/keybag")
        let saved = try Data(contentsOf: keybag)
        for _ in 1...10 {
            assertError(.authenticationFailed("")) { try keychain.unlock(passcode: "0000") }
            clock.advance(3600)
        }
        keychain = nil
        try saved.write(to: keybag)
        keychain = try open()
        try keychain.unlock(passcode: "1234")
        for protection in classes { XCTAssertEqual(readable(protection).failureCode, "itemNotFound") }
    }
}

extension Result where Failure == KeychainError {
    var failureCode: String? {
        guard case .failure(let error) = self else { return nil }
        return error.code.rawValue
    }
}

/// An embedded keychain's unlock held for the login session: later processes (here, later `Keychain`
/// instances, each starting as a new process does) start unlocked until a lock, a passcode change or a
/// reboot; the token opens nothing elsewhere.
final class SessionUnlockTests: EngineTestCase {
    private var runtime: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        runtime = NSTemporaryDirectory() + "runtime-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        chmod(runtime, 0o700)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: runtime)
        super.tearDown()
    }

    private func process(clock: (any KeychainClock)? = nil, directory: String? = nil) throws -> Keychain {
        var options = KeychainOptions(
            clock: clock ?? self.clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1), authenticators: .standard())
        options.sessionDirectory = runtime
        return try Keychain(directory: directory ?? self.directory, options: options)
    }

    private var tokens: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: runtime + "/keychain")) ?? []).filter {
            $0.hasPrefix("session-")
        }
    }

    func testAnUnlockForTheSessionOpensLaterProcessesUntilALock() throws {
        let first = try process()
        try first.setPasscode("2468", current: nil)
        _ = try first.add(password("s", "a", protection: "ak"), client: client)
        first.restart()
        try first.unlockForSession(passcode: SecureBytes(copying: Array("2468".utf8)))
        XCTAssertEqual(tokens.count, 1)
        let file = runtime + "/keychain/" + tokens[0]
        XCTAssertEqual(SecureFiles.permissions(of: file), 0o600)
        XCTAssertEqual(SecureFiles.permissions(of: runtime + "/keychain"), 0o700)
        // The token holds no passcode and no class key in the clear.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        XCTAssertNil(bytes.range(of: Data("2468".utf8)))

        let second = try process()
        XCTAssertEqual(second.status.lockState, .unlocked)
        XCTAssertEqual(try readSecret("s", "a", in: second), "secret")
        XCTAssertEqual(second.status.failedAttempts, 0, "a token is no passcode attempt")

        // A lock ends it: processes that start afterwards start before their first unlock.
        second.lock()
        XCTAssertEqual(tokens.count, 0)
        let third = try process()
        XCTAssertEqual(third.status.lockState, .beforeFirstUnlock)
        XCTAssertThrowsError(try readSecret("s", "a", in: third))
        // Without --session an unlock is this process's alone.
        try third.unlock(passcode: "2468")
        XCTAssertEqual(try process().status.lockState, .beforeFirstUnlock)
    }

    func testATokenOpensNothingAfterAPasscodeChangeARebootOrInAnotherKeychain() throws {
        let first = try process()
        try first.setPasscode("2468", current: nil)
        try first.unlockForSession(passcode: SecureBytes(copying: Array("2468".utf8)))
        let held = try Data(contentsOf: URL(fileURLWithPath: runtime + "/keychain/" + tokens[0]))

        // Another boot: the kernel's boot id differs, and the token is dropped.
        let rebooted = BootedElsewhereClock()
        XCTAssertEqual(try process(clock: rebooted).status.lockState, .beforeFirstUnlock)
        XCTAssertEqual(tokens.count, 0, "a token of another boot is removed")

        // Put back, it still opens this boot; a passcode change ends it.
        try SecureFiles.writeAtomically(held, to: runtime + "/keychain/" + SessionTokenName.of(first))
        XCTAssertEqual(try process().status.lockState, .unlocked)
        try first.setPasscode("1357", current: "2468")
        try SecureFiles.writeAtomically(held, to: runtime + "/keychain/" + SessionTokenName.of(first))
        XCTAssertEqual(try process().status.lockState, .beforeFirstUnlock, "a token of the old passcode opened")

        // Another keychain (another device root) given this one's token name and token opens nothing.
        let other = directory + "-other"
        defer { try? FileManager.default.removeItem(atPath: other) }
        let stranger = try process(directory: other)
        try stranger.setPasscode("2468", current: nil)
        stranger.restart()
        try SecureFiles.writeAtomically(held, to: runtime + "/keychain/" + SessionTokenName.of(stranger))
        XCTAssertEqual(try process(directory: other).status.lockState, .beforeFirstUnlock)
    }

    func testWithoutARuntimeDirectoryAnUnlockCannotBeHeld() throws {
        let keychain = try open()
        try keychain.setPasscode("2468", current: nil)
        XCTAssertThrowsError(try keychain.unlockForSession(passcode: SecureBytes(copying: Array("2468".utf8)))) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .notAvailable)
        }
    }
}

/// The clock of a machine booted again: the same time, another boot id.
final class BootedElsewhereClock: KeychainClock, @unchecked Sendable {
    func now() -> Date { Date(timeIntervalSince1970: 1_800_000_000) }
    func sinceBoot() -> BootInstant { BootInstant(boot: Data(repeating: 9, count: 16), nanoseconds: 0) }
}

/// The name a keychain's session token has in the runtime directory.
enum SessionTokenName {
    static func of(_ keychain: Keychain) -> String {
        keychain.sessionUnlock.map { ($0.path as NSString).lastPathComponent } ?? ""
    }
}

/// Class keys leave memory on lock: a test that knows the class-A key's bytes finds them in this
/// process before the lock (so the search works) and nowhere after it.
final class ClassKeyMemoryTests: EngineTestCase {
    func testTheClassAKeyIsGoneFromMemoryAfterALock() throws {
        try keychain.setPasscode("2468", current: nil)
        _ = try keychain.add(password("mem", "a", protection: "ak"), client: client)
        XCTAssertEqual(try readSecret("mem", "a"), "secret")
        let key = try KeyPattern(keychain.keybag.classKey(for: .whenUnlocked))
        XCTAssertGreaterThan(try key.occurrencesInThisProcess(), 0, "the search does not find a key in use")
        keychain.lock()
        XCTAssertEqual(try key.occurrencesInThisProcess(), 0, "the class-A key is still in memory after a lock")
    }
}

/// A 32-byte key to look for in this process's memory without ever holding it whole: its first 8 bytes
/// as the needle, the other 24 masked, compared byte by byte.
struct KeyPattern {
    private let head: [UInt8]
    private let maskedTail: [UInt8]
    private static let mask: UInt8 = 0xa5

    init(_ key: SecureBytes) throws {
        var head: [UInt8] = []
        var tail: [UInt8] = []
        key.withUnsafeBytes { bytes in
            head = Array(bytes[0..<8])
            tail = bytes[8..<32].map { $0 ^ Self.mask }
        }
        self.head = head
        maskedTail = tail
    }

    /// How many places in this process's writable memory hold the whole key.
    func occurrencesInThisProcess() throws -> Int {
        let tail = maskedTail
        guard
            let found = ProcessMemory.occurrences(
                ofNeedle: head, spanning: 32, in: getpid(),
                confirm: { place in
                    (0..<24).allSatisfy { place.load(fromByteOffset: 8 + $0, as: UInt8.self) ^ Self.mask == tail[$0] }
                })
        else { throw XCTSkip("/proc/self/mem cannot be read") }
        return found
    }
}
