import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import XCTest

/// Items whose access control guards their secret travel in backups still sealed under their
/// factors: the application password is still needed wherever they are restored, and what is bound
/// to this device's enrolled biometry or passcode opens only here.
final class GuardedItemBackupTests: EngineTestCase {
    private let backupPassword = SecureBytes(copying: Array("correct horse".utf8))
    private var backupPath: String { directory + "-backup.skbk" }

    override func tearDown() {
        for suffix in ["-backup.skbk", "-backup-2.skbk", "-other", "-third"] {
            try? FileManager.default.removeItem(atPath: directory + suffix)
        }
        super.tearDown()
    }

    private func guarded(_ account: String, flags: UInt, context: AuthenticationContextReference? = nil)
        -> [String: ItemValue]
    {
        var item = password("guarded", account, secret: "secret-of-\(account)")
        item["accc"] = .accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: flags))
        if let context { item["u_AuthCtx"] = .authenticationContext(context) }
        return item
    }

    /// The item's data as `keychain` gives it, with `applicationPassword` in the read's context and
    /// asking the user only when `interactive`.
    private func read(
        _ account: String, in keychain: Keychain, applicationPassword: String? = nil, interactive: Bool = true
    ) throws -> String? {
        var query = password("guarded", account, secret: nil)
        query["r_Data"] = .bool(true)
        if let applicationPassword {
            query["u_AuthCtx"] = .authenticationContext(
                AuthenticationContextReference(
                    applicationPassword: SecureBytes(copying: Array(applicationPassword.utf8))))
        }
        if !interactive { query["u_AuthUI"] = .string("u_AuthUIF") }
        return try keychain.copyMatching(query, client: client)?.bytes.map { String(decoding: $0, as: UTF8.self) }
    }

    func testAnApplicationPasswordItemTravelsAndStillNeedsItsPasswordWhereverItIsRestored() throws {
        let context = AuthenticationContextReference(applicationPassword: SecureBytes(copying: Array("app-pw".utf8)))
        _ = try keychain.add(
            guarded("app", flags: AccessControlPolicy.Flag.applicationPassword, context: context), client: client)
        let summary = try keychain.createBackup(at: backupPath, password: backupPassword)
        XCTAssertEqual(summary.itemCount, 1)
        XCTAssertEqual(summary.skipped, [:], "a guarded item is carried, not left out")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: backupPath))
        for needle in ["secret-of-app", "app-pw", "guarded", "TEAM.app"] {
            XCTAssertNil(bytes.range(of: Data(needle.utf8)), needle)
        }

        // Another device: the item is there, with its access control, and opens only with its password.
        let other = try open(directory: directory + "-other")
        XCTAssertEqual(try other.restoreBackup(from: backupPath, password: backupPassword).restored, 1)
        assertError(.authenticationFailed("")) { _ = try read("app", in: other, applicationPassword: "wrong") }
        assertError(.authenticationFailed("")) { _ = try read("app", in: other) }
        XCTAssertEqual(try read("app", in: other, applicationPassword: "app-pw"), "secret-of-app")
        var attributes = password("guarded", "app", secret: nil)
        attributes["r_Attributes"] = .bool(true)
        guard case .dictionary(let found)? = try other.copyMatching(attributes, client: client) else {
            return XCTFail("the restored item's attributes")
        }
        XCTAssertEqual(
            found["accc"], .accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: 1 << 31)))

        // And on again from there, as it came: a backup of the restored keychain carries it to a third.
        let second = directory + "-backup-2.skbk"
        XCTAssertEqual(try other.createBackup(at: second, password: backupPassword).itemCount, 1)
        let third = try open(directory: directory + "-third")
        XCTAssertEqual(try third.restoreBackup(from: second, password: backupPassword).restored, 1)
        assertError(.authenticationFailed("")) { _ = try read("app", in: third, applicationPassword: "wrong") }
        XCTAssertEqual(try read("app", in: third, applicationPassword: "app-pw"), "secret-of-app")

        // An update there re-seals it under its password as any item of that keychain.
        var query = password("guarded", "app", secret: nil)
        query["u_AuthCtx"] = .authenticationContext(context)
        try third.update(query, attributes: ["labl": .string("updated")], client: client)
        XCTAssertEqual(try read("app", in: third, applicationPassword: "app-pw"), "secret-of-app")
    }

    func testItemsBoundToThisDevicesBiometryOrPasscodeOpenOnlyHereAndThoseThatOnlyAskStayBehind() throws {
        let passcode = SecureBytes(copying: Array("1234".utf8))
        try keychain.setPasscode(passcode, current: nil)
        let here = InProcessKeychainService(keychain: keychain, client: client)
        _ = try here.biometry(.enroll)
        _ = try here.biometry(.standingAnswer(.match))
        typealias Flag = AccessControlPolicy.Flag
        for (account, flags) in [
            ("current-set", Flag.biometryCurrentSet), ("passcode", Flag.devicePasscode),
            ("both", Flag.biometryCurrentSet | Flag.devicePasscode | Flag.and),
            // These only ask: their sealed content opens with the item key alone, so it stays here.
            ("any", Flag.biometryAny), ("presence", Flag.userPresence),
            ("either", Flag.biometryCurrentSet | Flag.devicePasscode | Flag.or),
            ("passcode-and-any", Flag.devicePasscode | Flag.biometryAny | Flag.and),
        ] {
            _ = try keychain.add(guarded(account, flags: flags), client: client)
        }
        let summary = try keychain.createBackup(at: backupPath, password: backupPassword)
        XCTAssertEqual(summary.itemCount, 3)
        XCTAssertEqual(summary.skipped, [BackupSkip.needsUser.rawValue: 4])

        // This device: restored over themselves, each opens as before; those left out are still here.
        XCTAssertEqual(try keychain.restoreBackup(from: backupPath, password: backupPassword).restored, 3)
        XCTAssertEqual(try read("current-set", in: keychain), "secret-of-current-set")
        XCTAssertEqual(try read("any", in: keychain), "secret-of-any", "a guarded item the backup left out stays")
        // It opens, and only asking the user is left (which this read forbids).
        assertError(.interactionNotAllowed("")) { _ = try read("passcode", in: keychain, interactive: false) }
        assertError(.interactionNotAllowed("")) { _ = try read("both", in: keychain, interactive: false) }

        // Another device, with a passcode and a finger of its own: what is bound to this device's
        // enrollment or passcode is there but never opens.
        let other = try open(directory: directory + "-other")
        try other.setPasscode(passcode, current: nil)
        let there = InProcessKeychainService(keychain: other, client: client)
        _ = try there.biometry(.enroll)
        _ = try there.biometry(.standingAnswer(.match))
        XCTAssertEqual(try other.restoreBackup(from: backupPath, password: backupPassword).restored, 3)
        assertError(.itemNotFound) { _ = try read("current-set", in: other) }
        assertError(.itemNotFound) { _ = try read("passcode", in: other, interactive: false) }
        assertError(.itemNotFound) { _ = try read("both", in: other, interactive: false) }
        assertError(.itemNotFound) { _ = try read("any", in: other) }
        let everything: [String: ItemValue] = [
            "class": .string("genp"), "r_Attributes": .bool(true), "m_Limit": .string("m_LimitAll"),
        ]
        guard case .array(let found)? = try other.copyMatching(everything, client: client) else {
            return XCTFail("the restored items' attributes")
        }
        XCTAssertEqual(found.count, 3, "their attributes are there")
    }
}
