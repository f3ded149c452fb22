import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainStorage
import KeychainSyncProtocol

/// What a keychain keeps of its enrollment, in its sync ledger. The device's private keys, the
/// sync keys, and everything that names something (the server, the account, the devices and their
/// names in the trust view) are sealed under the keychain's own `ThisDeviceOnly` class keys: the
/// device keys, names and class C keys under `AfterFirstUnlockThisDeviceOnly` (a locked device still
/// syncs `AfterFirstUnlock` and `Always` items), zone keys and class A keys under
/// `WhenUnlockedThisDeviceOnly` (class A items are opened only while the keychain is unlocked). In
/// the clear: the account id, the cursor and chain, record ids and versions.
struct SyncEnrollment {
    enum Name {
        static let server = "server"
        static let account = "account"
        static let accountName = "account name"
        static let signing = "device signing key"
        static let encryption = "device encryption key"
        /// The tokens of device keys the device root holds (a TPM), in place of the keys themselves.
        static let signingToken = "device signing token"
        static let encryptionToken = "device encryption token"
        static let deviceKeys = "device public keys"
        static let deviceName = "device name"
        static let view = "trust view"
        static let knownDevices = "known devices"
        static let authorities = "certificate authorities"
        static let generation = "generation"
        static let cursor = "cursor"
        static let chain = "chain"
        static let awaiting = "awaiting"
        static let lastSync = "last sync"
        static let conflicts = "conflicts resolved"
        /// Set when the next sync must look at every item, not only those written since the last.
        static let fullScan = "full scan"
        static let tooLarge = "too large"
        /// After a recovery: the log position it was made at, and the devices trusted before it (until
        /// the first sync after it has pulled the log).
        static let recoveredWriters = "recovered writers"
        /// A recovery sent to the server and not known to be done: its request, sent again to finish it.
        static let pendingRecovery = "pending recovery"
        static func zone(_ generation: UInt64) -> String { "zone key \(generation)" }
        static func classKey(_ letter: UInt8, _ generation: UInt64) -> String {
            "class \(Character(UnicodeScalar(letter))) key \(generation)"
        }
    }

    var server: SyncAddress
    var account: Data
    var accountName: String
    var keys: SyncDeviceKeys
    var view: TrustView
    var generation: UInt64
    /// The CA file a `tls://` server's certificate is checked against (nil: the system's).
    var authorities: String?

    private static let names = ProtectionClass.afterFirstUnlockThisDeviceOnly

    static func load(_ local: SyncLocal, keychain: Keychain) throws -> SyncEnrollment? {
        let ledger = local.ledger
        guard let account = try ledger.value(Name.account) else { return nil }
        guard let server = try local.open(Name.server), let viewBytes = try local.open(Name.view),
            let keys = try deviceKeys(local, keychain: keychain)
        else { throw SyncError(.invalid, "this keychain's sync enrollment is incomplete: leave and enroll again") }
        return SyncEnrollment(
            server: try SyncAddress(parsing: server.withBorrowedData { String(decoding: $0, as: UTF8.self) }),
            account: account, accountName: try text(local, Name.accountName), keys: keys,
            view: try viewBytes.withBorrowedData { try TrustView.decode($0) },
            generation: try integer(ledger, Name.generation).map { UInt64($0) } ?? 0,
            authorities: try local.open(Name.authorities).map {
                $0.withBorrowedData { String(decoding: $0, as: UTF8.self) }
            })
    }

    /// The device's keys as kept: software keys, or the tokens of keys the device root holds.
    private static func deviceKeys(_ local: SyncLocal, keychain: Keychain) throws -> SyncDeviceKeys? {
        let name = try text(local, Name.deviceName)
        if let signing = try local.open(Name.signing), let encryption = try local.open(Name.encryption) {
            return try SyncDeviceKeys(
                signing: try signing.withBorrowedData { try AsymmetricKey.importing($0, kind: .ec, isPrivate: true) },
                encryption: try encryption.withBorrowedData {
                    try AsymmetricKey.importing($0, kind: .ec, isPrivate: true)
                },
                name: name)
        }
        guard let signing = try local.open(Name.signingToken), let encryption = try local.open(Name.encryptionToken),
            let publicKeys = try local.open(Name.deviceKeys), publicKeys.count == 130
        else { return nil }
        // Copies: borrowed bytes do not outlive the call that lends them.
        let points = publicKeys.withUnsafeBytes { Data($0) }
        return SyncAgent.enclaveKeys(
            device: try SyncDevice(
                signingKey: Data(points.prefix(65)), encryptionKey: Data(points.suffix(65)), name: name),
            signingToken: signing.withUnsafeBytes { Data($0) },
            encryptionToken: encryption.withUnsafeBytes { Data($0) },
            keychain: keychain)
    }

    private static func text(_ local: SyncLocal, _ name: String) throws -> String {
        try local.open(name)?.withBorrowedData { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// Seals a value that names something (not a secret, but not the world's either).
    static func sealName(_ local: SyncLocal, _ value: Data, as name: String) throws {
        try local.seal(SecureBytes(copying: value), as: name, protection: names)
    }

    /// The trust view this device holds now.
    static func saveView(_ local: SyncLocal, _ view: TrustView) throws {
        try sealName(local, view.encoded(), as: Name.view)
        try addKnownDevices(local, view.members)
    }

    /// Every device any view this device accepted named: a batch written before a device was removed
    /// is still checked against its writer's key.
    static func knownDevices(_ local: SyncLocal) throws -> [Data: SyncDevice] {
        guard let stored = try local.open(Name.knownDevices) else { return [:] }
        return try stored.withBorrowedData { (data) throws -> [Data: SyncDevice] in
            var reader = SyncReader(data, "the known devices")
            var result: [Data: SyncDevice] = [:]
            for _ in 0..<(try reader.count(max: 100_000)) {
                let device = try reader.device()
                result[device.id] = device
            }
            return result
        }
    }

    private static func addKnownDevices(_ local: SyncLocal, _ devices: [SyncDevice]) throws {
        var known = try knownDevices(local)
        let before = known.count
        for device in devices where known[device.id] == nil { known[device.id] = device }
        guard known.count != before || before == 0 else { return }
        var writer = ByteWriter()
        writer.writeCount(known.count)
        for device in known.values.sorted(by: { $0.id.lexicographicallyPrecedes($1.id) }) {
            device.encode(into: &writer)
        }
        try sealName(local, writer.data, as: Name.knownDevices)
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

    /// Stores a new enrollment (its keys and names sealed).
    static func save(
        _ local: SyncLocal, server: SyncAddress, account: Data, accountName: String, keys: SyncDeviceKeys,
        view: TrustView, authorities: String?
    ) throws {
        try local.ledger.erase()
        if let authorities { try sealName(local, Data(authorities.utf8), as: Name.authorities) }
        try local.ledger.setValue(Name.account, account)
        try sealName(local, Data(server.description.utf8), as: Name.server)
        try sealName(local, Data(accountName.utf8), as: Name.accountName)
        try sealName(local, Data(keys.device.name.utf8), as: Name.deviceName)
        switch keys.holder {
        case .software(let signing, let encryption):
            try local.seal(try signing.externalRepresentation(), as: Name.signing, protection: names)
            try local.seal(try encryption.externalRepresentation(), as: Name.encryption, protection: names)
        case .enclave(let signingToken, let encryptionToken):
            try sealName(local, signingToken, as: Name.signingToken)
            try sealName(local, encryptionToken, as: Name.encryptionToken)
            try sealName(local, keys.device.signingKey + keys.device.encryptionKey, as: Name.deviceKeys)
        }
        try saveView(local, view)
        try setInteger(local.ledger, Name.cursor, 0)
        try local.ledger.setValue(Name.chain, SyncHead.origin)
        try local.ledger.track()
        try local.markEverySyncingRowDirty()
        try local.ledger.setValue(Name.fullScan, Data([1]))
    }

    /// After a recovery, the devices whose records up to `through` this device applies although they
    /// are out of the account: the lost ones, trusted until the recovery.
    static func saveRecoveredWriters(_ local: SyncLocal, through: Int64, writers: [Data]) throws {
        var writer = ByteWriter()
        writer.write(through)
        writer.writeCount(writers.count)
        for id in writers { writer.writeBytes(id) }
        try local.ledger.setValue(Name.recoveredWriters, writer.data)
    }

    static func recoveredWriters(_ ledger: SyncLedger) throws -> (through: Int64, writers: Set<Data>) {
        guard let bytes = try ledger.value(Name.recoveredWriters) else { return (0, []) }
        var reader = SyncReader(bytes, "the recovered writers")
        let through = try reader.signed()
        var writers: Set<Data> = []
        for _ in 0..<(try reader.count(max: TrustView.maximumMembers)) {
            writers.insert(try reader.fixed(SyncDevice.idSize))
        }
        try reader.end()
        return (through, writers)
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
