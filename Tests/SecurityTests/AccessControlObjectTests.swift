import Foundation
import KeychainCore
import LocalAuthentication
import Security
import Synchronization
import XCTest

/// The access-control object itself and `LAContext` as an object.
final class AccessControlObjectTests: XCTestCase {
    func testTheProtectionAndConstraintsOfAnAccessControl() throws {
        let plain = try XCTUnwrap(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlock, [], nil))
        XCTAssertEqual(SecAccessControlGetProtection(plain) as? String, kSecAttrAccessibleAfterFirstUnlock as String)
        XCTAssertNil(SecAccessControlGetConstraints(plain))
        let either = try XCTUnwrap(
            SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.biometryAny, .devicePasscode, .or], nil))
        XCTAssertEqual(SecAccessControlGetProtection(either) as? String, "aku")
        let read = try XCTUnwrap(SecAccessControlGetConstraint(either, "od" as CFString) as? [String: Any])
        let factor = try XCTUnwrap(read["factor"] as? [String: Any])
        XCTAssertEqual(factor["kofn"] as? Int, 1)
        XCTAssertEqual(factor["factors"] as? [String], ["biometryAny", "devicePasscode"])
        XCTAssertEqual(SecAccessControlGetConstraint(either, "odel" as CFString) as? Bool, true)
        XCTAssertEqual(SecAccessControlGetConstraint(either, "oe" as CFString) as? Bool, true)
        let key = try XCTUnwrap(
            SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlocked, [.privateKeyUsage, .userPresence], nil))
        XCTAssertNil(SecAccessControlGetConstraint(key, "od" as CFString))
        XCTAssertEqual(
            (SecAccessControlGetConstraint(key, "osgn" as CFString) as? [String: Any])?["factor"] as? String,
            "userPresence")
        let password = try XCTUnwrap(
            SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, nil))
        XCTAssertEqual(
            (SecAccessControlGetConstraint(password, "od" as CFString) as? [String: Any])?["password"] as? Bool, true)
    }

    func testContextsAreObjectsThatAnyThreadMayUse() throws {
        let first = LAContext()
        let second = LAContext()
        XCTAssertEqual(first, first)
        XCTAssertNotEqual(first, second)
        XCTAssertEqual(Set([first, second, first]).count, 2)
        XCTAssertTrue((first as AnyObject) is NSObject)
        first.touchIDAuthenticationAllowableReuseDuration = 10_000
        XCTAssertEqual(
            first.touchIDAuthenticationAllowableReuseDuration, LATouchIDAuthenticationMaximumAllowableReuseDuration)
        first.touchIDAuthenticationAllowableReuseDuration = -1
        XCTAssertEqual(first.touchIDAuthenticationAllowableReuseDuration, 0)
        // Setting and reading from many threads at once.
        DispatchQueue.concurrentPerform(iterations: 2_000) { index in
            first.localizedReason = "reason \(index)"
            first.interactionNotAllowed = index % 2 == 0
            first.localizedCancelTitle = index % 3 == 0 ? nil : "cancel"
            _ = first.setCredential(Data([UInt8(index & 0xff)]), type: .applicationPassword)
            XCTAssertTrue(first.localizedReason.hasPrefix("reason "))
            XCTAssertTrue(first.isCredentialSet(.applicationPassword))
            _ = first.authenticationContextReference
        }
    }
}
