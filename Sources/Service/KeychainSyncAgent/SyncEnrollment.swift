import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainStorage
import KeychainSyncProtocol

/// What a keychain keeps of its enrollment, in its sync ledger. The device's private keys, the
/// anchor key and the sync keys are sealed under the keychain's own `ThisDeviceOnly` class keys: the
/// device keys and class C keys under `AfterFirstUnlockThisDeviceOnly` (a locked device still syncs
/// `AfterFirstUnlock` and `Always` items), zone keys and class A keys under
/// `WhenUnlockedThisDeviceOnly` (class A items are opened only while the keychain is unlocked).
struct SyncEnrollment {
    enum Name {
        static let server = "server"
        static let account = "account"
        static let accountName = "account name"
        static let signing = "device signing key"
        static let encryption = "device encryption key"
        static let deviceName = "device name"
        static let anchor = "recovery anchor"
        static let view = "trust view"
        static let generation = "generation"
        static let cursor = "cursor"
        static let chain = "chain"
        static let lastSync = "last sync"
        static let conflicts = "conflicts resolved"
        /// Set when the next sync must look at every item, not only those written since the last.
        static let fullScan = "full scan"
        static let tooLarge = "too large"
        static func zone(_ generation: UInt64) -> String { "zone key \(generation)" }
        static func classKey(_ letter: UInt8, _ generation: UInt64) -> String {
            "class \(Character(UnicodeScalar(letter))) key \(generation)"
        }
    }

    var server: SyncAddress
    var account: Data
    var accountName: String
    var keys: SyncDeviceKeys
    var anchor: HMACKey
    var view: TrustView
    var generation: UInt64

    static func load(_ local: SyncLocal) throws -> SyncEnrollment? {
        let ledger = local.ledger
        guard let serverBytes = try ledger.value(Name.server), let account = try ledger.value(Name.account),
            let viewBytes = try ledger.value(Name.view)
        else { return nil }
        guard let signing = try local.open(Name.signing), let encryption = try local.open(Name.encryption),
            let anchor = try local.open(Name.anchor)
        else { throw SyncError(.invalid, "this keychain's sync enrollment is incomplete: leave and enroll again") }
        let keys = try SyncDeviceKeys(
            signing: try signing.withBorrowedData { try AsymmetricKey.importing($0, kind: .ec, isPrivate: true) },
            encryption: try encryption.withBorrowedData { try AsymmetricKey.importing($0, kind: .ec, isPrivate: true) },
            name: String(decoding: try ledger.value(Name.deviceName) ?? Data(), as: UTF8.self))
        return SyncEnrollment(
            server: try SyncAddress(parsing: String(decoding: serverBytes, as: UTF8.self)), account: account,
            accountName: String(decoding: try ledger.value(Name.accountName) ?? Data(), as: UTF8.self), keys: keys,
            anchor: try HMACKey(key: anchor), view: try TrustView.decode(viewBytes),
            generation: try integer(ledger, Name.generation).map { UInt64($0) } ?? 0)
    }

    static func integer(_ ledger: SyncLedger, _ name: String) throws -> Int64? {
        guard let bytes = try ledger.value(name), bytes.count == 8 else { return nil }
        var reader = ByteReader(bytes)
        return try reader.read() as Int64
    }

    static func setInteger(_ ledger: SyncLedger, _ name: String, _ value: Int64) throws {
        var writer = ByteWriter()
        writer.write(value)
        try ledger.setValue(name, writer.data)
    }

    /// Stores a new enrollment (its keys sealed).
    static func save(
        _ local: SyncLocal, server: SyncAddress, account: Data, accountName: String, keys: SyncDeviceKeys,
        anchor: SecureBytes, view: TrustView
    ) throws {
        try local.ledger.erase()
        try local.ledger.setValue(Name.server, Data(server.description.utf8))
        try local.ledger.setValue(Name.account, account)
        try local.ledger.setValue(Name.accountName, Data(accountName.utf8))
        try local.ledger.setValue(Name.deviceName, Data(keys.device.name.utf8))
        try local.seal(
            try keys.signing.externalRepresentation(), as: Name.signing, protection: .afterFirstUnlockThisDeviceOnly)
        try local.seal(
            try keys.encryption.externalRepresentation(), as: Name.encryption,
            protection: .afterFirstUnlockThisDeviceOnly)
        try local.seal(anchor, as: Name.anchor, protection: .afterFirstUnlockThisDeviceOnly)
        try local.ledger.setValue(Name.view, view.encoded())
        try setInteger(local.ledger, Name.cursor, 0)
        try local.ledger.setValue(Name.chain, SyncHead.origin)
        try local.ledger.track()
        try local.ledger.setValue(Name.fullScan, Data([1]))
    }

    /// Keeps a zone key and the class keys derived from it.
    static func saveZoneKey(_ local: SyncLocal, _ zoneKey: SecureBytes, generation: UInt64) throws {
        try local.seal(zoneKey, as: Name.zone(generation), protection: .whenUnlockedThisDeviceOnly)
        for letter in [UInt8(ascii: "A"), UInt8(ascii: "C")] {
            let classKey = try KeyDerivation.hkdf(
                key: zoneKey, info: "swift-keychain sync class \(Character(UnicodeScalar(letter))) \(generation)")
            try local.seal(
                classKey, as: Name.classKey(letter, generation),
                protection: letter == UInt8(ascii: "A") ? .whenUnlockedThisDeviceOnly : .afterFirstUnlockThisDeviceOnly)
        }
    }

    /// A class key of a generation: nil when this device never had it; `locked` when its class is locked.
    static func classKey(_ local: SyncLocal, letter: UInt8, generation: UInt64) throws -> SecureBytes? {
        do {
            return try local.open(Name.classKey(letter, generation))
        } catch let error as KeychainError where error.code == .interactionNotAllowed {
            throw SyncError(.locked, "the keychain is locked: class A records wait for it to be unlocked")
        }
    }
}
