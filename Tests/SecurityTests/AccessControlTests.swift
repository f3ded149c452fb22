import Foundation
import KeychainCore
import LocalAuthentication
import Security
import Synchronization
import XCTest

/// Access control enforced: items whose `kSecAttrAccessControl` asks for the user, answered by the
/// simulated biometric sensor (driven here as `security biometry` drives it), `LAContext` evaluation
/// and reuse, application passwords, and the statuses Apple gives. Runs embedded and, through
/// `ThroughDaemonTests`, with the daemon deciding.
final class AccessControlTests: KeychainTestCase {
    private var service: any KeychainService {
        get throws { try KeychainServices.current() }
    }

    private func sensor(_ command: BiometryCommand) throws {
        _ = try service.biometry(command)
    }

    private func pendingAnswers() throws -> [SensorAnswer] { try service.biometry(.status).pendingAnswers }

    private func accessControl(
        _ flags: SecAccessControlCreateFlags, _ protection: CFString = kSecAttrAccessibleWhenUnlockedThisDeviceOnly
    ) -> SecAccessControl {
        var error: Unmanaged<CFError>?
        guard let accessControl = SecAccessControlCreateWithFlags(nil, protection, flags, &error) else {
            XCTFail("no access control for \(flags): \(String(describing: error?.takeRetainedValue()))")
            return SecAccessControlCreateWithFlags(nil, protection, [], nil)!
        }
        return accessControl
    }

    @discardableResult
    private func add(_ account: String, _ accessControl: SecAccessControl?, context: LAContext? = nil) -> OSStatus {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "acl",
            kSecAttrAccount as String: account, kSecValueData as String: Data("secret-\(account)".utf8),
        ]
        if let accessControl { query[kSecAttrAccessControl as String] = accessControl }
        if let context { query[kSecUseAuthenticationContext as String] = context }
        return SecItemAdd(query as CFDictionary, nil)
    }

    private func read(_ account: String, extra: [String: Any] = [:]) -> (OSStatus, String?) {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "acl",
            kSecAttrAccount as String: account, kSecReturnData as String: true,
        ]
        query.merge(extra) { $1 }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    // MARK: The architecture document's example

    func testSaveWithBiometryIsReadWithAMatchAndRefusedOnNoMatchAndCancel() throws {
        // No biometry enrolled: an item bound to the current set cannot be made.
        XCTAssertThrowsError(try saveWithBiometry(data: Data("token".utf8), key: "bio")) { error in
            guard case KeychainError.unexpectedStatus(let status) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(status, errSecAuthFailed)
        }
        try sensor(.enroll)
        try saveWithBiometry(data: Data("token".utf8), key: "bio")
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bio",
            kSecReturnData as String: true, kSecUseOperationPrompt as String: "Read your token",
        ]
        var result: CFTypeRef?
        try sensor(.answer(.match))
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("token".utf8))
        try sensor(.answer(.nomatch))
        result = nil
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecAuthFailed)
        XCTAssertNil(result)
        try sensor(.answer(.cancel))
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecUserCanceled)
        XCTAssertEqual(try pendingAnswers(), [], "each read asked the sensor once")

        // A new enrollment: the item is gone for good, and no prompt is shown for it.
        try sensor(.enroll)
        try sensor(.answer(.match))
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecItemNotFound)
        XCTAssertEqual(try pendingAnswers(), [.match], "a dead item asks nobody")
        // Saving it again (the example deletes first) binds it to the new set.
        try saveWithBiometry(data: Data("token 2".utf8), key: "bio")
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("token 2".utf8))
    }

    func testBiometryAnySurvivesAnEnrollmentChangeAndCurrentSetDoesNot() throws {
        try sensor(.enroll)
        XCTAssertEqual(add("any", accessControl(.biometryAny)), errSecSuccess)
        XCTAssertEqual(add("current", accessControl(.biometryCurrentSet)), errSecSuccess)
        try sensor(.standingAnswer(.match))
        XCTAssertEqual(read("any").1, "secret-any")
        XCTAssertEqual(read("current").1, "secret-current")
        try sensor(.unenroll)
        XCTAssertEqual(read("current").0, errSecItemNotFound)
        // biometryAny with nothing enrolled cannot be satisfied, but the item is not gone.
        XCTAssertEqual(read("any").0, errSecAuthFailed)
        try sensor(.enroll)
        XCTAssertEqual(read("any").1, "secret-any")
        XCTAssertEqual(read("current").0, errSecItemNotFound)
        // A dead item can still be deleted (delete asks nothing).
        let delete: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "current",
        ]
        XCTAssertEqual(SecItemDelete(delete as CFDictionary), errSecSuccess)
    }

    func testACurrentSetAlternativeIsNotSatisfiedByASetEnrolledLater() throws {
        try sensor(.enroll)
        try sensor(.standingAnswer(.match))
        XCTAssertEqual(add("either", accessControl([.biometryCurrentSet, .or, .companion])), errSecSuccess)
        XCTAssertEqual(read("either").1, "secret-either", "the set it was made under")
        try sensor(.enroll)
        // Another set now: the biometry alternative is gone, and no companion is paired.
        XCTAssertEqual(read("either").0, errSecAuthFailed)
        // Made with nothing enrolled, no later set satisfies it either.
        try sensor(.unenroll)
        XCTAssertEqual(add("later", accessControl([.biometryCurrentSet, .or, .companion])), errSecSuccess)
        try sensor(.enroll)
        XCTAssertEqual(read("later").0, errSecAuthFailed)
        // An update that sets a new access control binds it to the set enrolled now.
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "later"]
        let changes: [String: Any] = [
            kSecAttrAccessControl as String: accessControl([.biometryCurrentSet, .or, .devicePasscode])
        ]
        XCTAssertEqual(
            SecItemUpdate(query as CFDictionary, changes as CFDictionary), errSecAuthFailed, "it must open first")
    }

    // MARK: Asking the user, or not

    func testAuthenticationUIFailAndSkipAndNonInteractiveContexts() throws {
        try sensor(.enroll)
        try sensor(.standingAnswer(.match))
        XCTAssertEqual(add("guarded", accessControl(.biometryAny)), errSecSuccess)
        XCTAssertEqual(add("plain", nil), errSecSuccess)
        XCTAssertEqual(
            read("guarded", extra: [kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail]).0,
            errSecInteractionNotAllowed)
        let context = LAContext()
        context.interactionNotAllowed = true
        XCTAssertEqual(
            read("guarded", extra: [kSecUseAuthenticationContext as String: context]).0, errSecInteractionNotAllowed)
        // Skip leaves out what would need the user; the rest is returned.
        let all: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "acl",
            kSecReturnData as String: true, kSecReturnAttributes as String: true,
            kSecMatchLimit as String: kSecMatchLimitAll,
            kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
        ]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(all as CFDictionary, &result), errSecSuccess)
        let accounts = (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String }
        XCTAssertEqual(accounts, ["plain"])
        XCTAssertEqual(
            read("guarded", extra: [kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip]).0,
            errSecItemNotFound)
        // Allowed (the default): the sensor is asked.
        XCTAssertEqual(read("guarded").1, "secret-guarded")
        // Skip leaves out any item not satisfied already, whatever the reason (here: nothing enrolled).
        try sensor(.unenroll)
        XCTAssertEqual(SecItemCopyMatching(all as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(
            (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String }, ["plain"])
    }

    func testAnApplicationPasswordIsTestedOnlyAfterTheRestIsSatisfied() throws {
        try sensor(.enroll)
        let right = LAContext()
        _ = right.setCredential(Data("right".utf8), type: .applicationPassword)
        XCTAssertEqual(add("both", accessControl([.biometryAny, .applicationPassword]), context: right), errSecSuccess)
        let wrong = LAContext()
        _ = wrong.setCredential(Data("wrong".utf8), type: .applicationPassword)
        // Without biometry, a wrong and a right password answer the same: the password is not tested.
        for context in [wrong, right] {
            XCTAssertEqual(
                read(
                    "both",
                    extra: [
                        kSecUseAuthenticationContext as String: context,
                        kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
                    ]
                ).0, errSecInteractionNotAllowed)
            try sensor(.answer(.nomatch))
            XCTAssertEqual(read("both", extra: [kSecUseAuthenticationContext as String: context]).0, errSecAuthFailed)
        }
        try sensor(.answer(.match))
        XCTAssertEqual(read("both", extra: [kSecUseAuthenticationContext as String: wrong]).0, errSecAuthFailed)
        try sensor(.answer(.match))
        XCTAssertEqual(read("both", extra: [kSecUseAuthenticationContext as String: right]).1, "secret-both")
    }

    func testAttributesAreReadWithoutAskingAndDeleteAsksNothing() throws {
        try sensor(.enroll)
        let policy = accessControl(.biometryAny)
        XCTAssertEqual(add("guarded", policy), errSecSuccess)
        try sensor(.standingAnswer(.nomatch))  // any prompt would fail
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
            kSecReturnAttributes as String: true,
        ]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        let attributes = result as? [String: Any]
        XCTAssertEqual(attributes?[kSecAttrAccount as String] as? String, "guarded")
        XCTAssertNil(attributes?[kSecValueData as String])
        let returned = attributes?[kSecAttrAccessControl as String] as? SecAccessControl
        XCTAssertEqual(returned, policy)
        XCTAssertEqual(returned.map { CFGetTypeID($0) }, SecAccessControlGetTypeID())
        let delete: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
        ]
        XCTAssertEqual(SecItemDelete(delete as CFDictionary), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecItemNotFound)
    }

    func testAnUpdateDecryptsSoItAsksFirst() throws {
        try sensor(.enroll)
        XCTAssertEqual(add("guarded", accessControl(.biometryCurrentSet)), errSecSuccess)
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
        ]
        let changes: [String: Any] = [kSecValueData as String: Data("changed".utf8)]
        try sensor(.answer(.nomatch))
        XCTAssertEqual(SecItemUpdate(query as CFDictionary, changes as CFDictionary), errSecAuthFailed)
        try sensor(.answer(.match))
        XCTAssertEqual(read("guarded").1, "secret-guarded", "the refused update changed nothing")
        try sensor(.answer(.match))
        XCTAssertEqual(SecItemUpdate(query as CFDictionary, changes as CFDictionary), errSecSuccess)
        try sensor(.answer(.match))
        XCTAssertEqual(read("guarded").1, "changed")
        // Still bound to the enrolled set after the update.
        try sensor(.enroll)
        XCTAssertEqual(read("guarded").0, errSecItemNotFound)
    }

    // MARK: LAContext

    func testAnEvaluatedContextSatisfiesLaterCallsWithoutAskingAgain() throws {
        try sensor(.enroll)
        XCTAssertEqual(add("guarded", accessControl(.biometryCurrentSet)), errSecSuccess)
        let context = LAContext()
        var error: NSError?
        XCTAssertTrue(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertNil(error)
        XCTAssertEqual(context.biometryType, .faceID)
        XCTAssertNil(context.evaluatedPolicyDomainState)
        try sensor(.answer(.match))
        let evaluated = expectation(description: "evaluated")
        context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Sign in") { success, error in
            XCTAssertTrue(success)
            XCTAssertNil(error)
            evaluated.fulfill()
        }
        wait(for: [evaluated], timeout: 10)
        let domainState = try XCTUnwrap(context.evaluatedPolicyDomainState)
        try sensor(.standingAnswer(.nomatch))  // asking again would fail
        for _ in 0..<3 {
            XCTAssertEqual(
                read("guarded", extra: [kSecUseAuthenticationContext as String: context]).1, "secret-guarded")
        }
        // Another context has evaluated nothing: it asks, and the sensor says no.
        XCTAssertEqual(
            read("guarded", extra: [kSecUseAuthenticationContext as String: LAContext()]).0, errSecAuthFailed)
        // A new enrollment: the context's match was for the old set.
        try sensor(.enroll)
        try sensor(.standingAnswer(.match))
        XCTAssertEqual(read("guarded", extra: [kSecUseAuthenticationContext as String: context]).0, errSecItemNotFound)
        let fresh = LAContext()
        XCTAssertTrue(try awaitEvaluation(fresh))
        XCTAssertNotEqual(fresh.evaluatedPolicyDomainState, domainState, "the domain state follows the enrollment")
        // Invalidated: it satisfies nothing, and evaluates nothing.
        XCTAssertEqual(add("second", accessControl(.biometryAny)), errSecSuccess)
        XCTAssertEqual(read("second", extra: [kSecUseAuthenticationContext as String: fresh]).1, "secret-second")
        fresh.invalidate()
        XCTAssertEqual(read("second", extra: [kSecUseAuthenticationContext as String: fresh]).0, errSecAuthFailed)
        XCTAssertThrowsError(try awaitEvaluation(fresh)) { error in
            XCTAssertEqual((error as? LAError)?.code, .invalidContext)
        }
        XCTAssertFalse(fresh.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(error?.code, LAError.invalidContext.rawValue)
    }

    private func awaitEvaluation(_ context: LAContext) throws -> Bool {
        let done = expectation(description: "evaluation")
        let outcome = Mutex<Result<Bool, any Error>?>(nil)
        context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "test") { success, error in
            outcome.withLock { $0 = error.map { .failure($0) } ?? .success(success) }
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        return try XCTUnwrap(outcome.withLock { $0 }).get()
    }

    func testPolicyOutcomesAndTheirLAErrorCodes() async throws {
        let context = LAContext()
        var error: NSError?
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(error?.domain, LAError.errorDomain)
        XCTAssertEqual(error?.code, LAError.biometryNotEnrolled.rawValue)
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        XCTAssertEqual(error?.code, LAError.passcodeNotSet.rawValue)
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithCompanion, error: &error))
        XCTAssertEqual(error?.code, LAError.companionNotAvailable.rawValue)
        do {
            _ = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "x")
            XCTFail("evaluated with nothing enrolled")
        } catch let error as LAError {
            XCTAssertEqual(error.code, .biometryNotEnrolled)
            XCTAssertEqual((error as NSError).code, -7)
            XCTAssertEqual((error as NSError).domain, "com.apple.LocalAuthentication")
        }
        try sensor(.enroll)
        XCTAssertTrue(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        for (answer, code) in [(SensorAnswer.nomatch, LAError.Code.authenticationFailed), (.cancel, .userCancel)] {
            try sensor(.answer(answer))
            do {
                _ = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "x")
                XCTFail("\(answer) evaluated")
            } catch let error as LAError {
                XCTAssertEqual(error.code, code)
            }
        }
        context.interactionNotAllowed = true
        do {
            _ = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "x")
            XCTFail("evaluated without interaction")
        } catch let error as LAError {
            XCTAssertEqual(error.code, .notInteractive)
        }
        context.interactionNotAllowed = false
        try sensor(.answer(.match))
        let matched = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "x")
        XCTAssertTrue(matched)
    }

    func testEvaluateAccessControlForUseSatisfiesTheItem() throws {
        try sensor(.enroll)
        let policy = accessControl(.biometryAny)
        XCTAssertEqual(add("guarded", policy), errSecSuccess)
        let context = LAContext()
        let created = expectation(description: "create")
        context.evaluateAccessControl(policy, operation: .createItem, localizedReason: "create") { success, _ in
            XCTAssertTrue(success)
            created.fulfill()
        }
        wait(for: [created], timeout: 10)
        XCTAssertEqual(try pendingAnswers(), [], "creating asks nobody")
        try sensor(.answer(.match))
        let used = expectation(description: "use")
        context.evaluateAccessControl(policy, operation: .useItem, localizedReason: "use") { success, error in
            XCTAssertTrue(success)
            XCTAssertNil(error)
            used.fulfill()
        }
        wait(for: [used], timeout: 10)
        try sensor(.standingAnswer(.nomatch))
        XCTAssertEqual(read("guarded", extra: [kSecUseAuthenticationContext as String: context]).1, "secret-guarded")
    }

    // MARK: Combinations

    func testOrAndAndCombinations() throws {
        try sensor(.enroll)
        try sensor(.standingAnswer(.match))
        XCTAssertEqual(add("or", accessControl([.biometryAny, .devicePasscode, .or])), errSecSuccess)
        XCTAssertEqual(read("or").1, "secret-or", "biometry alone satisfies an or")
        // And: the device passcode is also required, so the item is bound to one, and none is set.
        XCTAssertEqual(add("and", accessControl([.biometryAny, .devicePasscode, .and])), errSecAuthFailed)
        XCTAssertEqual(add("presence", accessControl(.userPresence)), errSecSuccess)
        XCTAssertEqual(read("presence").1, "secret-presence", "user presence is biometry when enrolled")
        try sensor(.standingAnswer(.cancel))
        XCTAssertEqual(read("or").0, errSecUserCanceled, "a cancel ends an or")
        XCTAssertEqual(add("companion", accessControl(.companion)), errSecSuccess)
        XCTAssertEqual(read("companion").0, errSecAuthFailed, "no companion device is paired")
    }

    func testACompanionDeviceApprovesWhenPaired() throws {
        XCTAssertEqual(add("watch", accessControl(.companion)), errSecSuccess)
        XCTAssertEqual(read("watch").0, errSecAuthFailed, "no companion is paired")
        let context = LAContext()
        var error: NSError?
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithCompanion, error: &error))
        XCTAssertEqual(error?.code, LAError.companionNotAvailable.rawValue)
        _ = try service.companion(.enroll)
        XCTAssertTrue(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithCompanion, error: &error))
        _ = try service.companion(.answer(.nomatch))
        XCTAssertEqual(read("watch").0, errSecAuthFailed)
        _ = try service.companion(.answer(.cancel))
        XCTAssertEqual(read("watch").0, errSecUserCanceled)
        _ = try service.companion(.answer(.match))
        XCTAssertEqual(read("watch").1, "secret-watch")
        XCTAssertEqual(try service.companion(.status).pendingAnswers, [])
        // The sensor and the companion are separate: answering one answers nothing of the other.
        try sensor(.enroll)
        _ = try service.companion(.standingAnswer(.match))
        XCTAssertEqual(add("face", accessControl(.biometryAny)), errSecSuccess)
        try sensor(.answer(.nomatch))
        XCTAssertEqual(read("face").0, errSecAuthFailed)
        _ = try service.companion(.unenroll)
        XCTAssertEqual(read("watch").0, errSecAuthFailed, "unpaired again")
    }

    // MARK: Application passwords

    func testApplicationPasswordItemsOpenOnlyWithThePassword() throws {
        let policy = accessControl(.applicationPassword)
        XCTAssertEqual(add("app", policy), errSecAuthFailed, "an application-password item needs the password")
        let context = LAContext()
        XCTAssertFalse(context.isCredentialSet(.applicationPassword))
        XCTAssertTrue(context.setCredential(Data("hunter2".utf8), type: .applicationPassword))
        XCTAssertTrue(context.isCredentialSet(.applicationPassword))
        XCTAssertFalse(context.setCredential(Data("1234".utf8), type: .smartCardPIN))
        XCTAssertEqual(add("app", policy, context: context), errSecSuccess)
        XCTAssertEqual(read("app").0, errSecAuthFailed, "no password, no secret")
        XCTAssertEqual(read("app", extra: [kSecUseAuthenticationContext as String: context]).1, "secret-app")
        let wrong = LAContext()
        _ = wrong.setCredential(Data("hunter3".utf8), type: .applicationPassword)
        XCTAssertEqual(read("app", extra: [kSecUseAuthenticationContext as String: wrong]).0, errSecAuthFailed)
        XCTAssertTrue(context.setCredential(nil, type: .applicationPassword))
        XCTAssertFalse(context.isCredentialSet(.applicationPassword))
        XCTAssertEqual(read("app", extra: [kSecUseAuthenticationContext as String: context]).0, errSecAuthFailed)
        // Its attributes are readable as any item's.
        var result: CFTypeRef?
        let attributes: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "app",
            kSecReturnAttributes as String: true,
        ]
        XCTAssertEqual(SecItemCopyMatching(attributes as CFDictionary, &result), errSecSuccess)
    }

    // MARK: Bad input

    func testBadAccessControlsAreRefused() {
        var error: Unmanaged<CFError>?
        XCTAssertNil(
            SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlocked, SecAccessControlCreateFlags(rawValue: 1 << 7), &error))
        XCTAssertEqual((error?.takeRetainedValue() as NSError?)?.code, Int(errSecParam))
        XCTAssertNil(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.or, .and], nil))
        XCTAssertNil(
            SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlocked, [.biometryAny, .biometryCurrentSet], nil))
        XCTAssertNil(SecAccessControlCreateWithFlags(nil, "nonsense" as CFString, .userPresence, nil))
        // An access control of the wrong CF type.
        let wrongType: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "w",
            kSecAttrAccessControl as String: "biometry",
        ]
        XCTAssertEqual(SecItemAdd(wrongType as CFDictionary, nil), errSecParam)
        // Constraints and synchronizable.
        let synchronizable: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "s",
            kSecAttrAccessControl as String: accessControl(.userPresence), kSecAttrSynchronizable as String: true,
        ]
        XCTAssertEqual(SecItemAdd(synchronizable as CFDictionary, nil), errSecParam)
        // A context that is no LAContext.
        let badContext: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "c",
            kSecUseAuthenticationContext as String: "context", kSecReturnData as String: true,
        ]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(badContext as CFDictionary, &result), errSecParam)
    }
}
