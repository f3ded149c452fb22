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
