import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import XCTest

@testable import KeychainEngine

/// What a guarded item gives away without the user: nothing derived from its secret.
final class GuardedItemTests: EngineTestCase {
    private func record(secret: String, flags: UInt) -> ItemRecord {
        ItemRecord(
            itemClass: .genericPassword, persistentID: Data(repeating: 1, count: 16), protection: .whenUnlocked,
            accessGroup: "TEAM.app", synchronizable: false, tombstone: false,
            attributes: ["acct": .string("a"), "svce": .string("s"), "cdat": .date(Date(timeIntervalSince1970: 0))],
            accessControl: flags == 0 ? nil : AccessControlPolicy(protection: .whenUnlocked, flags: flags),
            secret: SecureBytes(copying: Data(secret.utf8)))
    }

    private func digest(_ record: ItemRecord) throws -> ItemValue? {
        var record = record
        try record.updateDigest()
        return record.attributes["sha1"]
    }

    func testTheSHA1OfAGuardedItemDoesNotDependOnItsSecret() throws {
        // Unguarded: the digest covers the secret, as Apple's does.
        XCTAssertNotEqual(try digest(record(secret: "1234", flags: 0)), try digest(record(secret: "1235", flags: 0)))
        for flags in [AccessControlPolicy.Flag.biometryAny, AccessControlPolicy.Flag.applicationPassword] {
            XCTAssertEqual(
                try digest(record(secret: "1234", flags: flags)), try digest(record(secret: "1235", flags: flags)),
                "a guess at the secret cannot be checked against sha1 (flags \(flags))")
        }
    }

    func testOneProcessCannotPushOutAnothersContexts() throws {
        let first = InProcessKeychainService(
            keychain: keychain, client: ClientIdentity(accessGroups: ["TEAM.app"], contextScope: "first"))
        let second = InProcessKeychainService(
            keychain: keychain, client: ClientIdentity(accessGroups: ["TEAM.app"], contextScope: "second"))
        let invalidated = AuthenticationContextReference()
        try first.invalidate(invalidated)
        func state(of service: InProcessKeychainService, _ context: AuthenticationContextReference) throws
            -> AuthenticationFailure?
        {
            try service.authenticate(
                AuthenticationRequest(context: context, subject: .policy(.biometrics), preflight: true, reason: "")
            )
            .failure
        }
        XCTAssertEqual(try state(of: first, invalidated), .invalidContext)
        // The same identifier from another process names another context.
        XCTAssertEqual(try state(of: second, invalidated), .biometryNotEnrolled)
        // Another process making thousands of contexts leaves the first one's alone.
        for _ in 0..<(AuthenticationBroker.contextsPerScope * 4) {
            try second.invalidate(AuthenticationContextReference())
        }
        XCTAssertEqual(try state(of: first, invalidated), .invalidContext)
        // A process's own flood pushes out only its own oldest.
        for _ in 0..<(AuthenticationBroker.contextsPerScope + 1) {
            try first.invalidate(AuthenticationContextReference())
        }
        XCTAssertEqual(try state(of: first, invalidated), .biometryNotEnrolled)
    }

    func testAnUpdateCannotMakeAGuardedItemSynchronizable() throws {
        var item = password("s", "a")
        item["accc"] = .accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: 0))
        _ = try keychain.add(item, client: client)
        var synchronizable = password("s", "b")
        synchronizable["sync"] = .bool(true)
        _ = try keychain.add(synchronizable, client: client)
        let guarded = AccessControlPolicy(protection: .whenUnlocked, flags: AccessControlPolicy.Flag.biometryAny)
        var query = password("s", "b", secret: nil)
        query["sync"] = .bool(true)
        XCTAssertThrowsError(
            try keychain.update(query, attributes: ["accc": .accessControl(guarded)], client: client)
        ) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .invalidParameter)
        }
    }
}
