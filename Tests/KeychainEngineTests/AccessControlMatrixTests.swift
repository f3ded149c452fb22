import Foundation
import KeychainAuthenticators
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainTestSupport
import XCTest

/// Every allowed combination of access-control flags against each outcome of the authenticators: the
/// biometric sensor and the passcode prompt both say yes, both say no, the user cancels, no biometry is
/// enrolled any more (the prompt gives the right passcode), or the call forbids asking. Each expected
/// status is written out by hand.
final class AccessControlMatrixTests: EngineTestCase {
    private enum Outcome: CaseIterable {
        case match, noMatch, cancel, notEnrolled, noInteraction
    }

    private typealias Flag = AccessControlPolicy.Flag

    /// The status of a read of the secret, for each outcome in `Outcome.allCases` order.
    private let table: [(name: String, flags: UInt, expected: [KeychainError.Code?])] = [
        ("userPresence", Flag.userPresence, [nil, .authenticationFailed, .userCanceled, nil, .interactionNotAllowed]),
        (
            "biometryAny", Flag.biometryAny,
            [nil, .authenticationFailed, .userCanceled, .authenticationFailed, .interactionNotAllowed]
        ),
        (
            "biometryCurrentSet", Flag.biometryCurrentSet,
            [nil, .authenticationFailed, .userCanceled, .itemNotFound, .interactionNotAllowed]
        ),
        (
            "devicePasscode", Flag.devicePasscode,
            [nil, .authenticationFailed, .userCanceled, nil, .interactionNotAllowed]
        ),
        (
            "companion", Flag.companion,
            [
                .authenticationFailed, .authenticationFailed, .authenticationFailed, .authenticationFailed,
                .authenticationFailed,
            ]
        ),
        (
            "biometryAny or devicePasscode", Flag.biometryAny | Flag.devicePasscode | Flag.or,
            [nil, .authenticationFailed, .userCanceled, nil, .interactionNotAllowed]
        ),
        (
            "biometryAny and devicePasscode", Flag.biometryAny | Flag.devicePasscode | Flag.and,
            [nil, .authenticationFailed, .userCanceled, .authenticationFailed, .interactionNotAllowed]
        ),
        (
            "biometryCurrentSet and devicePasscode", Flag.biometryCurrentSet | Flag.devicePasscode | Flag.and,
            [nil, .authenticationFailed, .userCanceled, .itemNotFound, .interactionNotAllowed]
        ),
        (
            "biometryCurrentSet or devicePasscode", Flag.biometryCurrentSet | Flag.devicePasscode | Flag.or,
            [nil, .authenticationFailed, .userCanceled, nil, .interactionNotAllowed]
        ),
        (
            "biometryAny or companion", Flag.biometryAny | Flag.companion | Flag.or,
            [nil, .authenticationFailed, .userCanceled, .authenticationFailed, .interactionNotAllowed]
        ),
        ("applicationPassword", Flag.applicationPassword, [nil, nil, nil, nil, nil]),
        (
            "userPresence and applicationPassword", Flag.userPresence | Flag.applicationPassword,
            [nil, .authenticationFailed, .userCanceled, nil, .interactionNotAllowed]
        ),
        (
            "biometryAny and devicePasscode and applicationPassword",
            Flag.biometryAny | Flag.devicePasscode | Flag.and | Flag.applicationPassword,
            [nil, .authenticationFailed, .userCanceled, .authenticationFailed, .interactionNotAllowed]
        ),
    ]

    func testEveryCombinationWithEveryOutcome() throws {
        let pinentry = try FakePinentry(.passcode("2468"))
        keychain = nil
        let engine = try Keychain(
            directory: directory,
            options: KeychainOptions(
                clock: clock, passcodeFunction: .scrypt(logN: 4, r: 1, p: 1),
                authenticators: .standard(pinentryProgram: pinentry.path, biometryAnswerWait: .zero)))
        let service = InProcessKeychainService(keychain: engine, client: client)
        try service.setPasscode(SecureBytes(copying: Array("2468".utf8)), current: nil)
        let password = SecureBytes(copying: Array("app-password".utf8))
        for (row, entry) in table.enumerated() {
            XCTAssertNil(AccessControlPolicy.problem(withFlags: entry.flags), entry.name)
            for (column, outcome) in Outcome.allCases.enumerated() {
                let account = "\(row)-\(column)"
                _ = try service.biometry(.enroll)
                _ = try service.biometry(.standingAnswer(nil))
                let context = AuthenticationContextReference(applicationPassword: password)
                var item = self.password("matrix", account, secret: account)
                item["accc"] = .accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: entry.flags))
                item["u_AuthCtx"] = .authenticationContext(context)
                _ = try service.add(item)
                var query = self.password("matrix", account, secret: nil)
                query["r_Data"] = .bool(true)
                // A fresh context per read (nothing evaluated), with the application password.
                query["u_AuthCtx"] = .authenticationContext(
                    AuthenticationContextReference(applicationPassword: password))
                switch outcome {
                case .match:
                    _ = try service.biometry(.standingAnswer(.match))
                    try pinentry.set(.passcode("2468"))
                case .noMatch:
                    _ = try service.biometry(.standingAnswer(.nomatch))
                    try pinentry.set(.passcode("0000"))
                case .cancel:
                    _ = try service.biometry(.standingAnswer(.cancel))
                    try pinentry.set(.cancel)
                case .notEnrolled:
                    _ = try service.biometry(.unenroll)
                    try pinentry.set(.passcode("2468"))
                case .noInteraction:
                    _ = try service.biometry(.standingAnswer(.match))
                    try pinentry.set(.passcode("2468"))
                    query["u_AuthUI"] = .string("u_AuthUIF")
                }
                var got: KeychainError.Code?
                do {
                    let result = try service.copyMatching(query)
                    XCTAssertEqual(result, .data(Data(account.utf8)), "\(entry.name), \(outcome)")
                } catch let error as KeychainError {
                    got = error.code
                }
                XCTAssertEqual(got, entry.expected[column], "\(entry.name), \(outcome)")
                // Wrong passcodes count: time moves on past their delays, and the right one clears them.
                clock.advance(3 * 3600)
            }
        }
    }
}
