import Foundation
import KeychainBytes
import KeychainCore
import XCTest

@testable import KeychainEngine

/// What a restore takes of a record: only what an add would take, so that a backup crafted with its
/// password plants nothing an app could not have added.
final class RestorableRecordTests: XCTestCase {
    private func record(flags: UInt?, protection: ProtectionClass = .whenUnlocked, policyClass: ProtectionClass? = nil)
        -> ItemRecord
    {
        ItemRecord(
            itemClass: .genericPassword, persistentID: Data(repeating: 1, count: 16), protection: protection,
            accessGroup: "TEAM.app", synchronizable: false, tombstone: false,
            attributes: ["acct": .string("a"), "svce": .string("s")],
            accessControl: flags.map { AccessControlPolicy(protection: policyClass ?? protection, flags: $0) },
            secret: nil)
    }

    private let carried = ItemCrypto.CarriedSecret(
        salt: Data(count: 16), itemKey: SecureBytes(copying: [UInt8](repeating: 7, count: 32)), context: Data(),
        sealed: Data(count: 32))

    func testOnlyWhatAnAddWouldTakeIsRestored() {
        typealias Flag = AccessControlPolicy.Flag
        XCTAssertTrue(Keychain.isRestorable(record(flags: nil), carried: nil))
        XCTAssertTrue(Keychain.isRestorable(record(flags: Flag.devicePasscode), carried: carried))
        XCTAssertTrue(Keychain.isRestorable(record(flags: Flag.applicationPassword), carried: carried))
        XCTAssertTrue(Keychain.isRestorable(record(flags: 0), carried: nil), "an access control that guards nothing")
        // A guarded item without its carried secret, or an unguarded one with one.
        XCTAssertFalse(Keychain.isRestorable(record(flags: Flag.devicePasscode), carried: nil))
        XCTAssertFalse(Keychain.isRestorable(record(flags: nil), carried: carried))
        // A guarded item that only asks: never carried, so never restored with a carried secret.
        XCTAssertFalse(Keychain.isRestorable(record(flags: Flag.biometryAny), carried: carried))
        XCTAssertFalse(
            Keychain.isRestorable(
                record(flags: Flag.biometryCurrentSet | Flag.devicePasscode | Flag.or), carried: carried))
        // Flags no add accepts, and an access control of another class than the item's.
        XCTAssertFalse(Keychain.isRestorable(record(flags: 1 << 20), carried: nil))
        XCTAssertFalse(Keychain.isRestorable(record(flags: Flag.or | Flag.and | Flag.devicePasscode), carried: carried))
        XCTAssertFalse(Keychain.isRestorable(record(flags: 0, policyClass: .whenUnlockedThisDeviceOnly), carried: nil))
    }
}
