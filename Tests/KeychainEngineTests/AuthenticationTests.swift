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

/// The engine's side of access control: what is on disk for a guarded item, and a prompt nobody
/// answers.
final class AuthenticationTests: EngineTestCase {
    private let guarded = AccessControlPolicy(
        protection: .whenUnlocked, flags: AccessControlPolicy.Flag.biometryCurrentSet)

    private func service(wait: Duration) throws -> InProcessKeychainService {
        let keychain = try Keychain(
            directory: directory,
            options: KeychainOptions(clock: clock, authenticators: .standard(biometryAnswerWait: wait)))
        return InProcessKeychainService(keychain: keychain, client: client)
    }

    func testAPromptNobodyAnswersEndsAsACancelAfterItsWait() throws {
        keychain = nil
        let service = try service(wait: .milliseconds(300))
        _ = try service.biometry(.enroll)
        var item = password("s", "a")
        item["accc"] = .accessControl(guarded)
        _ = try service.add(item)
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        let start = ContinuousClock.now
        XCTAssertThrowsError(try service.copyMatching(query)) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .userCanceled)
        }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(300))
        // An answer given while a prompt waits is taken by that prompt.
        let waiting = try self.service(wait: .seconds(20))
        let answerer = Thread {
            usleep(200_000)
            _ = try? waiting.biometry(.answer(.match))
        }
        answerer.start()
        XCTAssertEqual(try waiting.copyMatching(query), .data(Data("secret".utf8)))
        XCTAssertEqual(try waiting.biometry(.status).pendingAnswers, [])
    }

    func testTheBiometryFileHoldsNoEnrollmentSecretInTheClear() throws {
        keychain = nil
        let service = try service(wait: .zero)
        let status = try service.biometry(.enroll)
        let file = try XCTUnwrap(FileManager.default.contents(atPath: directory + "/biometry"))
        XCTAssertEqual(
            try FileManager.default.attributesOfItem(atPath: directory + "/biometry")[.posixPermissions] as? Int, 0o600)
        let text = String(decoding: file, as: UTF8.self)
        XCTAssertTrue(text.contains("sealedEnrollment"), text)
        XCTAssertFalse(text.contains("\"enrollment\""), text)
        // The domain state is a digest that changes with each enrollment.
        let again = try service.biometry(.enroll)
        XCTAssertNotEqual(status.domainState, again.domainState)
        XCTAssertEqual(status.domainState?.count, 32)
    }

    func testAGuardedSecretDoesNotOpenOnTheUnguardedPath() throws {
        keychain = nil
        let service = try service(wait: .zero)
        _ = try service.biometry(.enroll)
        _ = try service.biometry(.standingAnswer(.match))
        var item = password("s", "a", secret: "very-secret")
        item["accc"] = .accessControl(guarded)
        _ = try service.add(item)
        // Even with the class key, the blob is of the guarded version, whose content key mixes the
        // enrollment in: flipping its version byte makes it open on no path.
        let database = directory + "/" + Keychain.databaseName
        try flipSecretVersion(database)
        var query = password("s", "a", secret: nil)
        query["r_Data"] = .bool(true)
        XCTAssertThrowsError(try service.copyMatching(query)) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .itemNotFound)
        }
    }

    private func flipSecretVersion(_ database: String) throws {
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(database, &handle), SQLITE_OK)
        defer { sqlite3_close(handle) }
        func scalar(_ sql: String) -> Int64 {
            var statement: OpaquePointer?
            XCTAssertEqual(sqlite3_prepare_v2(handle, sql, -1, &statement, nil), SQLITE_OK)
            defer { sqlite3_finalize(statement) }
            XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
            return sqlite3_column_int64(statement, 0)
        }
        XCTAssertEqual(scalar("SELECT count(*) FROM items"), 1)
        XCTAssertEqual(scalar("SELECT unicode(substr(CAST(secret AS TEXT), 1, 1)) FROM items"), 2, "a guarded blob")
        XCTAssertEqual(
            sqlite3_exec(handle, "UPDATE items SET secret = X'01' || substr(secret, 2)", nil, nil, nil), SQLITE_OK)
        XCTAssertEqual(scalar("SELECT hex(substr(secret, 1, 1)) = '01' FROM items"), 1)
    }
}
