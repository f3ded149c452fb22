import Foundation
import KeychainAuthenticators
import KeychainCore
import KeychainCrypto
import KeychainDBus
import KeychainEngine
import KeychainTestSupport
import XCTest

/// Biometry from a fingerprint reader through fprintd (a stand-in on a bus of the test's own).
final class FprintdTests: EngineTestCase {
    private func service(bus: TestBus) throws -> InProcessKeychainService {
        keychain = nil
        let options = KeychainOptions(
            clock: clock,
            authenticators: .standard(
                sensor: .fprintd(bus: bus.address, username: "tester"), biometryAnswerWait: .seconds(5)))
        return InProcessKeychainService(keychain: try Keychain(directory: directory, options: options), client: client)
    }

    private func read(_ service: InProcessKeychainService, _ account: String) -> Result<ItemResult?, KeychainError> {
        var query = password("s", account, secret: nil)
        query["r_Data"] = .bool(true)
        return Result { try service.copyMatching(query) }.mapError { $0 as? KeychainError ?? .internalError("\($0)") }
    }

    private func add(_ service: InProcessKeychainService, _ account: String, flags: UInt) throws {
        var item = password("s", account, secret: account)
        item["accc"] = .accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: flags))
        _ = try service.add(item)
    }

    func testAReaderVerifiesEnrolledFingersAndAChangedListKillsCurrentSetItems() throws {
        let bus = try TestBus()
        let fprintd = try FakeFprintd(bus: bus)
        defer { fprintd.stop() }
        let service = try service(bus: bus)
        let status = try service.biometry(.status)
        XCTAssertTrue(status.enrolled)
        XCTAssertNotNil(status.domainState)
        let outcome = try service.authenticate(
            AuthenticationRequest(
                context: AuthenticationContextReference(), subject: .policy(.biometrics), preflight: true, reason: ""))
        XCTAssertNil(outcome.failure)
        XCTAssertEqual(outcome.biometryType, 1, "a fingerprint reader is Touch ID")
        // The simulated sensor's commands do not drive a real reader.
        XCTAssertThrowsError(try service.biometry(.answer(.match)))

        try add(service, "any", flags: AccessControlPolicy.Flag.biometryAny)
        try add(service, "current", flags: AccessControlPolicy.Flag.biometryCurrentSet)
        XCTAssertEqual(try read(service, "any").get(), .data(Data("any".utf8)))
        fprintd.setResults([
            ("verify-retry-scan", false), ("verify-finger-not-centered", false), ("verify-match", true),
        ])
        XCTAssertEqual(try read(service, "current").get(), .data(Data("current".utf8)), "retries are waited out")
        fprintd.setResults([("verify-no-match", false), ("verify-no-match", true)])
        XCTAssertEqual(read(service, "any").failureCode, .authenticationFailed)
        fprintd.setResults([("verify-disconnected", true)])
        XCTAssertEqual(read(service, "any").failureCode, .authenticationFailed)

        // Another finger enrolled: a new set. The current-set item is gone, without asking.
        let asked = fprintd.verifications
        fprintd.setFingers(["right-index-finger", "left-thumb"])
        fprintd.setResults([("verify-match", true)])
        XCTAssertEqual(read(service, "current").failureCode, .itemNotFound)
        XCTAssertEqual(fprintd.verifications, asked, "a dead item asks nobody")
        XCTAssertEqual(try read(service, "any").get(), .data(Data("any".utf8)))
        XCTAssertNotEqual(try service.biometry(.status).domainState, status.domainState)

        // No fingers at all: nothing to verify.
        fprintd.setFingers([])
        XCTAssertFalse(try service.biometry(.status).enrolled)
        XCTAssertEqual(read(service, "any").failureCode, .authenticationFailed)
    }

    func testNoFprintdMeansNoBiometry() throws {
        let bus = try TestBus()  // nobody owns fprintd's name
        let service = try service(bus: bus)
        XCTAssertFalse(try service.biometry(.status).enrolled)
        let outcome = try service.authenticate(
            AuthenticationRequest(
                context: AuthenticationContextReference(), subject: .policy(.biometrics), preflight: true, reason: ""))
        XCTAssertEqual(outcome.failure, .biometryNotEnrolled)
    }

    func testOnlyFprintdsOwnSignalsCount() throws {
        let bus = try TestBus()
        let fprintd = try FakeFprintd(bus: bus)
        defer { fprintd.stop() }
        let service = try service(bus: bus)
        try add(service, "any", flags: AccessControlPolicy.Flag.biometryAny)
        // fprintd sends nothing; an impostor sends a match to every connection on the bus.
        fprintd.setResults([])
        let impostor = try DBusConnectionForTests(bus: bus)
        let reader = Thread {
            for _ in 0..<40 {
                impostor.broadcastMatch()
                usleep(50_000)
            }
        }
        reader.start()
        XCTAssertEqual(read(service, "any").failureCode, .userCanceled, "the prompt ran out, unanswered by fprintd")
    }
}

extension Result where Success == ItemResult?, Failure == KeychainError {
    fileprivate var failureCode: KeychainError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
