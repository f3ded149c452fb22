import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainStorage

/// A synchronizable item as sync carries it: its record id (the item's persistent reference), its
/// payload (the item's class, protection, attributes and secret, in the backup's item format), and
/// what sync compares without opening the payload again.
public struct SyncItem: @unchecked Sendable {
    public let recordID: Data
    public let protection: ProtectionClass
    public let tombstone: Bool
    public let modificationDate: Date
    /// Secret: it holds the item's data.
    public let payload: SecureBytes
    /// Keyed digest of the payload: equal exactly when the item is unchanged.
    public let digest: Data
    /// The keyed digest of the item's primary key (the row's uniqueness).
    public let primaryKey: Data
}

/// What sync may read and change of a keychain, inside one write transaction of its database, so
/// that an applied pull and the ledger that remembers it commit together.
public final class SyncLocal {
    public let ledger: SyncLedger
    private let store: ItemStore
    private let keychain: Keychain
    private let digests: ItemDigests
    private let keys: [ProtectionClass: SecureBytes]
    /// Protection classes whose items sync: `WhenUnlocked`, `AfterFirstUnlock`, `Always`; never a
    /// `ThisDeviceOnly` one.
    public static let travellingClasses: [ProtectionClass] = [.whenUnlocked, .afterFirstUnlock, .always]

    init(keychain: Keychain, connection: Connection, digests: ItemDigests) {
        self.keychain = keychain
        ledger = SyncLedger(connection: connection)
        store = ItemStore(connection: connection)
        self.digests = digests
        keys = keychain.availableClassKeys()
    }

    /// Whether the keys of `protection`'s class are available now (a locked keychain lacks class A's).
    public func isAvailable(_ protection: ProtectionClass) -> Bool { keys[protection] != nil }

    /// Every synchronizable item (and tombstone) that travels, of the classes whose keys are available.
    /// An item with access control flags, a token item or a guarded one never travels (Apple refuses
    /// to make such an item synchronizable; one restored from elsewhere is left here).
    public func items() throws -> [SyncItem] {
        var result: [SyncItem] = []
        try store.forEachSynchronizedItem(protectionClasses: Self.travellingClasses.map(\.rawValue)) { row in
            if let item = try syncItem(row) { result.append(item) }
        }
        return result
    }

    /// The item (or tombstone) whose record id is `recordID`, if it travels.
    public func item(recordID: Data) throws -> SyncItem? {
        guard let row = try store.item(persistentID: recordID), row.synchronizable else { return nil }
        return try syncItem(row)
    }

    /// Whether a row with this record id still syncs: synchronizable and of a class that travels (told
    /// from its clear columns, so also when its class is locked).
    public func hasSyncingRow(recordID: Data) throws -> Bool {
        guard let row = try store.item(persistentID: recordID) else { return false }
        return row.synchronizable && Self.travellingClasses.map(\.rawValue).contains(row.protectionClass)
    }

    /// Whether a row with this record id exists that does not sync (the user turned sync off, or made
    /// it `ThisDeviceOnly`): a pulled version never replaces it.
    public func hasNonSyncingRow(recordID: Data) throws -> Bool {
        guard let row = try store.item(persistentID: recordID) else { return false }
        return !(row.synchronizable && Self.travellingClasses.map(\.rawValue).contains(row.protectionClass))
    }

    /// Marks every synchronizable row for sync to look at (an enrollment, a new key generation).
    public func markEverySyncingRowDirty() throws {
        try ledger.connection.execute(
            "INSERT OR IGNORE INTO sync_dirty(persistref) SELECT persistref FROM items WHERE sync = 1")
    }

    /// The local row holding the primary key of `payload`'s item, if any (live or tombstone).
    public func item(samePrimaryKeyAs payload: SecureBytes) throws -> SyncItem? {
        guard let decoded = Self.decode(payload), let key = keys[decoded.record.protection] else { return nil }
        let row = try ItemSealing.seal(decoded.record, classKey: key, digests: digests)
        guard let existing = try store.item(primaryKeyDigest: row.primaryKeyDigest) else { return nil }
        return try syncItem(existing)
    }

    /// The keyed digest of a payload (as `SyncItem.digest`), and its primary-key digest.
    public func digests(of payload: SecureBytes) throws -> (digest: Data, primaryKey: Data)? {
        guard let decoded = Self.decode(payload), let key = keys[decoded.record.protection] else { return nil }
        let row = try ItemSealing.seal(decoded.record, classKey: key, digests: digests)
        return (try digests.syncPayload(payload), row.primaryKeyDigest)
    }

    /// Stores a payload that came from the account as the item `recordID`: it replaces the item with
    /// that record id and whatever holds its primary key here. Refused (false) when the payload is not
    /// an item that travels or its class key is not available.
    public func store(_ payload: SecureBytes, recordID: Data) throws -> Bool {
        guard var decoded = Self.decode(payload), recordID.count == 16, Self.travels(decoded.record),
            !decoded.record.tombstone, let key = keys[decoded.record.protection]
        else { return false }
        decoded.record.persistentID = recordID
        let row = try ItemSealing.seal(decoded.record, classKey: key, digests: digests)
        if let existing = try store.item(persistentID: recordID) { try store.delete(rowID: existing.rowID) }
        if let existing = try store.item(primaryKeyDigest: row.primaryKeyDigest) {
            try store.delete(rowID: existing.rowID)
        }
        try store.insert(row)
        return true
    }

    /// Removes the item (or tombstone) `recordID` here, leaving no tombstone: the deletion came from
    /// the account.
    public func remove(recordID: Data) throws {
        if let existing = try store.item(persistentID: recordID) { try store.delete(rowID: existing.rowID) }
    }

    /// A payload's protection class and modification date, without storing it.
    public static func describe(_ payload: SecureBytes) -> (protection: ProtectionClass, tombstone: Bool, date: Date)? {
        guard let decoded = decode(payload) else { return nil }
        return (decoded.record.protection, decoded.record.tombstone, decoded.record.modificationDate)
    }

    /// A payload's class, attributes (dates and group included) and secret, without storing it: what a
    /// version in the account's history held.
    public static func contents(_ payload: SecureBytes) -> (
        itemClass: ItemClass, attributes: [String: ItemValue], secret: SecureBytes?
    )? {
        guard let decoded = decode(payload) else { return nil }
        return (decoded.record.itemClass, decoded.record.attributes, decoded.record.secret)
    }

    /// Seals a value of this device's sync state under this keychain's key of `protection` (a
    /// `ThisDeviceOnly` class: the value never leaves the device, and opens only when that class does).
    public func seal(_ value: SecureBytes, as name: String, protection: ProtectionClass) throws {
        guard let key = keys[protection] else { throw KeychainError.interactionNotAllowed("the keychain is locked") }
        let sealed = try AESGCM.seal(value, key: key, authenticating: Data("sync state \(name)".utf8))
        try ledger.setValue(name, Data([UInt8(protection.rawValue)]) + sealed)
    }

    /// A sealed value back: nil when there is none; `interactionNotAllowed` when its class is locked.
    public func open(_ name: String) throws -> SecureBytes? {
        guard let stored = try ledger.value(name), let first = stored.first,
            let protection = ProtectionClass(rawValue: Int(first))
        else { return nil }
        guard let key = keys[protection] else { throw KeychainError.interactionNotAllowed("the keychain is locked") }
        return try AESGCM.openSecure(
            Data(stored.dropFirst()), key: key, authenticating: Data("sync state \(name)".utf8))
    }

    private func syncItem(_ row: StoredItem) throws -> SyncItem? {
        guard let protection = ProtectionClass(rawValue: row.protectionClass),
            Self.travellingClasses.contains(protection),
            let itemClass = ItemClass(rawValue: row.itemClass), let key = keys[protection],
            !ItemCrypto.isGuarded(row.secret)
        else { return nil }
        let binding = RowBinding(row: row, itemClass: itemClass, protection: protection)
        guard let metadataBytes = try? ItemCrypto.open(row.metadata, part: .metadata, binding: binding, classKey: key),
            let metadata = try? ItemRecordCoding.decodeMetadata(metadataBytes),
            let secret = try? ItemCrypto.openSecret(row.secret, part: .secret, binding: binding, classKey: key)
        else { return nil }
        guard metadata.accessControl.map({ $0.flags == 0 && !$0.guardsSecret }) ?? true,
            metadata.attributes["tkid"].map({ $0 == .string("") }) ?? true, metadata.enclavePublicKey == nil
        else { return nil }
        let payload = BackupItemCoding.encode(
            BackupItem(
                itemClass: itemClass, protection: protection, persistentID: row.persistentID, metadata: metadataBytes,
                secret: .stored(secret)))
        var date = Date(timeIntervalSince1970: 0)
        if case .date(let value) = metadata.attributes["mdat"] { date = value }
        return SyncItem(
            recordID: row.persistentID, protection: protection, tombstone: row.tombstone, modificationDate: date,
            payload: payload, digest: try digests.syncPayload(payload), primaryKey: row.primaryKeyDigest)
    }

    private static func decode(_ payload: SecureBytes) -> (record: ItemRecord, carried: ItemCrypto.CarriedSecret?)? {
        let header = payload.withUnsafeBytes { Array($0.prefix(2)) }
        guard header.count == 2, let itemClass = ItemClass(rawValue: Int(header[0])),
            let protection = ProtectionClass(rawValue: Int(header[1]))
        else { return nil }
        guard let decoded = BackupItemCoding.decode(payload, protection: protection, itemClass: itemClass),
            decoded.carried == nil
        else { return nil }
        return decoded
    }

    /// Whether an item may travel: synchronizable, of a class that migrates, with no access control
    /// flags and no token, attributes of its class only.
    static func travels(_ record: ItemRecord) -> Bool {
        guard record.synchronizable, travellingClasses.contains(record.protection), record.enclavePublicKey == nil,
            record.biometryBinding == nil, record.accessControl.map({ $0.flags == 0 && !$0.guardsSecret }) ?? true,
            record.attributes["tkid"].map({ $0 == .string("") }) ?? true, !record.accessGroup.isEmpty
        else { return false }
        return record.attributes.keys.allSatisfy { name in
            AttributeSchema.descriptor(name, in: record.itemClass) != nil || ["cdat", "mdat", "sha1"].contains(name)
        }
    }
}

extension SyncLocal {
    /// Forgets the sync state (an erase of all content and settings: the device leaves its account as
    /// it leaves everything else), in the caller's transaction.
    static func forgetState(_ connection: Connection) throws {
        let exists = try connection.statement(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sync_state'")
        defer { exists.reset() }
        guard try exists.step() else { return }
        let ledger = SyncLedger(connection: connection)
        try ledger.erase()
        try ledger.untrack()
    }

    /// Seals this keychain's sync state again under new class keys (a move to another device root), in
    /// the caller's transaction. A value that does not open under the old key of the class its first
    /// byte names is not a sealed one (a cursor, an id) and stays as it is.
    static func resealState(
        _ connection: Connection, from oldKeys: [ProtectionClass: SecureBytes],
        to newKeys: [ProtectionClass: SecureBytes]
    ) throws {
        let exists = try connection.statement(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sync_state'")
        defer { exists.reset() }
        guard try exists.step() else { return }
        let ledger = SyncLedger(connection: connection)
        let select = try connection.statement("SELECT name, value FROM sync_state")
        var sealed: [(String, Data)] = []
        while try select.step() {
            if let name = select.text(at: 0), let value = select.data(at: 1) { sealed.append((name, value)) }
        }
        select.reset()
        for (name, value) in sealed {
            guard let first = value.first, let protection = ProtectionClass(rawValue: Int(first)),
                let oldKey = oldKeys[protection], let newKey = newKeys[protection]
            else { continue }
            let context = Data("sync state \(name)".utf8)
            guard let plain = try? AESGCM.openSecure(Data(value.dropFirst()), key: oldKey, authenticating: context)
            else { continue }
            try ledger.setValue(name, Data([first]) + (try AESGCM.seal(plain, key: newKey, authenticating: context)))
        }
    }
}

extension Keychain {
    /// Runs `body` in one write transaction of this keychain's database, with what sync may read and
    /// change of it.
    public func syncTransaction<T>(_ body: (SyncLocal) throws -> T) throws -> T {
        try perform {
            let digests = try digests()
            // The tables are made once per object: not on every transaction of a sync.
            let ready = syncLedgerReady.load(ordering: .acquiring)
            let result = try itemTransaction { connection in
                let local = SyncLocal(keychain: self, connection: connection, digests: digests)
                if !ready { try local.ledger.prepare() }
                return try body(local)
            }
            if !ready { syncLedgerReady.store(true, ordering: .releasing) }
            return result
        }
    }
}
