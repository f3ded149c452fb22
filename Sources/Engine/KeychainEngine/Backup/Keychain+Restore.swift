import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag
import KeychainStorage

/// Restoring a backup, with Apple's rules (spec §A.1 of the facts): the whole file is authenticated
/// before anything is written, and the restore is one transaction.
extension Keychain {
    /// Restores the backup at `path` into this keychain.
    ///
    /// The file's MAC is checked over every byte first; then, in one transaction, the keychain's local
    /// non-synchronizable items are replaced by the backup's, its synchronizable ones are kept, and an
    /// item in both is resolved by the newer `mdat`. Items the backup never holds stay
    /// (`WhenPasscodeSetThisDeviceOnly` items, enclave keys). Restored items keep their persistent
    /// references and are sealed under this keychain's own class keys. The file is read again during
    /// the transaction, and a byte that differs from the checked file rolls it back.
    ///
    /// - Throws: `authenticationFailed` for a wrong password; `decode` for a damaged or foreign file;
    ///   `interactionNotAllowed` when the keychain has a passcode and is locked.
    public func restoreBackup(
        from path: String, password: SecureBytes?, progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> RestoreReport {
        try restoreBackup(from: try BackupSource(path: path), password: password, progress: progress)
    }

    /// Restores the backup in `descriptor`, a regular file opened for reading: what a daemon does with
    /// the file its caller opened and passed over the socket. The descriptor stays the caller's.
    public func restoreBackup(
        fromDescriptor descriptor: Int32, password: SecureBytes?,
        progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> RestoreReport {
        try restoreBackup(from: try BackupSource(duplicating: descriptor), password: password, progress: progress)
    }

    private func restoreBackup(
        from file: BackupSource, password: SecureBytes?, progress: ((_ done: Int, _ total: Int) -> Void)?
    ) throws -> RestoreReport {
        defer { file.close() }
        return try perform {
            let status = keybag.status
            if status.passcodeSet, status.lockState != .unlocked {
                throw KeychainError.interactionNotAllowed("the keychain is locked: unlock it to restore into it")
            }
            let localKeys = availableClassKeys()
            let (header, _) = try BackupHeader.read(from: file.input())
            let backupKeybag = try BackupKeybag.open(header, password: password, keybag: keybag)
            let now = clock.now()
            // First pass: the whole file, MAC and structure, before anything is written.
            let expected = try readItems(of: file, keybag: backupKeybag) { _, _, _ in }
            var report = RestoreReport(restored: 0, notForThisDevice: 0, skipped: 0, replacedLocal: 0, keptLocal: 0)
            let digests = try digests()
            try itemTransaction { connection in
                let store = ItemStore(connection: connection)
                report.replacedLocal = try removeLocalItems(store: store, keys: localKeys)
                var done = 0
                let counts = try readItems(of: file, keybag: backupKeybag) { protection, itemClass, sealed in
                    defer {
                        done += 1
                        progress?(done, expected.items)
                    }
                    guard let classKey = backupKeybag.classKeys[protection] else {
                        report.notForThisDevice += 1
                        return
                    }
                    guard
                        let plaintext = try? AESGCM.openSecure(
                            sealed, key: classKey,
                            authenticating: backupKeybag.itemContext(protection: protection, itemClass: itemClass)),
                        let (record, carried) = BackupItemCoding.decode(
                            plaintext, protection: protection, itemClass: itemClass),
                        Self.isRestorable(record, carried: carried)
                    else {
                        report.skipped += 1
                        return
                    }
                    switch try restore(
                        record, carried: carried, store: store, digests: digests, keys: localKeys, now: now)
                    {
                    case .restored: report.restored += 1
                    case .keptLocal: report.keptLocal += 1
                    case .skipped: report.skipped += 1
                    }
                }
                guard counts == expected else {
                    throw KeychainError.decode(
                        "the backup file changed while it was being restored; nothing was restored")
                }
            }
            return report
        }
    }

    /// Reads every item entry of the file, handing each to `body`, then checks the summary and the MAC.
    /// Returns the counts the summary holds.
    private func readItems(
        of file: BackupSource, keybag backupKeybag: BackupKeybag,
        _ body: (ProtectionClass, ItemClass, Data) throws -> Void
    ) throws -> BackupCounts {
        let input = file.input()
        let (header, headerBytes) = try BackupHeader.read(from: input)
        guard header.uuid == backupKeybag.uuid else {
            throw KeychainError.decode("the backup file changed while it was being restored; nothing was restored")
        }
        try input.startAuthenticating(with: try backupKeybag.macKey(), header: headerBytes)
        // Entries are handed on as they are read: the first pass hands them nowhere, and the second
        // runs inside the restore's transaction, which a failed check below rolls back.
        var seen = 0
        while true {
            let length = Int(try input.readUInt32())
            if length == 0 { break }
            guard length > 2, length <= BackupHeader.maximumItem, length <= input.remaining else {
                throw KeychainError.decode("the backup file is truncated or damaged (an item is longer than the file)")
            }
            let entry = try input.read(length)
            guard let protection = ProtectionClass(rawValue: Int(entry[entry.startIndex])),
                let itemClass = ItemClass(rawValue: Int(entry[entry.startIndex + 1]))
            else { throw KeychainError.decode("the backup file holds a damaged item") }
            seen += 1
            try body(protection, itemClass, entry.dropFirst(2))
        }
        let summaryLength = Int(try input.readUInt32())
        guard summaryLength == BackupCounts.encodedSize else {
            throw KeychainError.decode("the backup file's summary is damaged")
        }
        let summaryBytes = try input.read(summaryLength)
        let computed = try input.finishMAC()
        let stored = try input.read(32, authenticated: false)
        guard input.remaining == 0 else { throw KeychainError.decode("bytes follow the backup's end") }
        guard ConstantTime.equal(computed, stored) else {
            throw KeychainError.decode("the backup file is damaged or was changed (its MAC does not match)")
        }
        let (uuid, counts) = try BackupCounts.decode(summaryBytes)
        guard uuid == header.uuid else {
            throw KeychainError.decode("the backup file's summary belongs to another backup (keybag UUID mismatch)")
        }
        guard seen == counts.items else {
            throw KeychainError.decode("the backup file holds another number of items than its summary says")
        }
        return counts
    }

    /// Deletes the local items a restore replaces: every non-synchronizable item and tombstone, except
    /// those no backup holds (`WhenPasscodeSetThisDeviceOnly` items, token items, items whose access
    /// control only asks for the user). A key or a guarded item whose attributes do not open, so that
    /// it cannot be told from those, stays. Returns how many live items went.
    private func removeLocalItems(store: ItemStore, keys: [ProtectionClass: SecureBytes]) throws -> Int {
        let passcodeOnly = ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue
        let guardedFormats = ItemCrypto.guardedFormats
        var removed = try store.deleteUnsynchronized(
            exceptProtectionClass: passcodeOnly, exceptItemClass: ItemClass.key.rawValue,
            exceptSecretFormats: guardedFormats)
        // What the bulk delete left to decide one by one: keys (an enclave key, a token item, stays, and only
        // its sealed attributes say so) and guarded items (one whose access control only asks for the user
        // never travels in a backup, so it stays, as the device-only items do).
        var replaced: [(rowID: Int64, live: Bool)] = []
        let decide = { (row: StoredItem) in
            if self.isReplacedByARestore(row, keys: keys) { replaced.append((row.rowID, !row.tombstone)) }
        }
        try store.forEachUnsynchronizedItem(secretFormats: guardedFormats) { row in
            if row.itemClass != ItemClass.key.rawValue { decide(row) }
        }
        for tombstone in [false, true] {
            try store.forEachItem(itemClass: ItemClass.key.rawValue, tombstone: tombstone) { decide($0) }
        }
        for row in replaced {
            try store.delete(rowID: row.rowID)
            if row.live { removed += 1 }
        }
        return removed
    }

    /// Whether a restore replaces this local row: it is not synchronizable nor of the passcode class, its
    /// attributes open, it is no token's, and its secret is what a backup holds (unguarded, or guarded by
    /// factors alone). One that cannot be told apart stays.
    private func isReplacedByARestore(_ row: StoredItem, keys: [ProtectionClass: SecureBytes]) -> Bool {
        guard !row.synchronizable, row.protectionClass != ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue,
            let protection = ProtectionClass(rawValue: row.protectionClass), let classKey = keys[protection],
            let record = ItemDecryption.open(row, protection: protection, classKey: classKey, needSecret: false),
            record.attributes["tkid"].map({ $0 == .string("") }) ?? true
        else { return false }
        guard ItemCrypto.isGuarded(row.secret) else { return record.accessControl?.guardsSecret != true }
        return record.accessControl.map(Self.travelsSealed) ?? false
    }

    /// Whether a record from a backup may be stored as an item here: what an add would accept of it,
    /// with its secret carried sealed exactly when its access control guards it. Only a crafted file
    /// (made with its password) holds anything else.
    static func isRestorable(_ record: ItemRecord, carried: ItemCrypto.CarriedSecret?) -> Bool {
        let guarded = record.accessControl?.guardsSecret == true
        if let accessControl = record.accessControl {
            // As an add would take it: flags that make sense, of the item's own class; and a guarded
            // secret only where nothing but its factors opens it.
            guard AccessControlPolicy.problem(withFlags: accessControl.flags) == nil,
                accessControl.protection == record.protection, !guarded || travelsSealed(accessControl)
            else { return false }
        }
        guard !record.tombstone, guarded == (carried != nil), record.enclavePublicKey == nil,
            record.biometryBinding == nil || record.accessControl != nil,
            record.protection != .whenPasscodeSetThisDeviceOnly,
            record.attributes["tkid"].map({ $0 == .string("") }) ?? true,
            !(record.synchronizable && (!record.protection.migrates || record.accessControl?.flags ?? 0 != 0)),
            !record.accessGroup.isEmpty
        else { return false }
        return record.attributes.keys.allSatisfy { name in
            AttributeSchema.descriptor(name, in: record.itemClass) != nil || ["cdat", "mdat", "sha1"].contains(name)
        }
    }

    private enum RestoreOutcome {
        case restored, keptLocal, skipped
    }

    /// Seals one backup record under this keychain's class key and stores it. An item here with the
    /// same primary key stays when it is not a synchronizable one (a device-only item, an enclave key,
    /// or one restored a moment ago from the same file), and when it is synchronizable and newer
    /// (`mdat`, then the smaller `sha1`); a backup's date later than now counts as now.
    private func restore(
        _ record: ItemRecord, carried: ItemCrypto.CarriedSecret?, store: ItemStore, digests: ItemDigests,
        keys: [ProtectionClass: SecureBytes], now: Date
    ) throws -> RestoreOutcome {
        guard let classKey = keys[record.protection],
            var row = try? ItemSealing.seal(record, classKey: classKey, digests: digests, carried: carried)
        else { return .skipped }
        // Most restores go into a keychain emptied of everything the backup holds: the insert is tried
        // first, and only a collision is looked into.
        do {
            try store.insert(row)
            return .restored
        } catch let error as StorageError where error.kind == .constraint {}
        if let existing = try store.item(primaryKeyDigest: row.primaryKeyDigest) {
            guard existing.synchronizable, !existing.tombstone,
                let protection = ProtectionClass(rawValue: existing.protectionClass), let key = keys[protection],
                let current = ItemDecryption.open(existing, protection: protection, classKey: key, needSecret: false),
                !Self.isNewer(current, than: record, now: now)
            else { return .keptLocal }
            try store.delete(rowID: existing.rowID)
        }
        if try store.item(persistentID: record.persistentID) != nil {
            // The reference names another item here (one kept): the restored item gets a new one.
            var renamed = record
            renamed.persistentID = try Random.bytes(16)
            guard let resealed = try? ItemSealing.seal(renamed, classKey: classKey, digests: digests, carried: carried)
            else {
                return .skipped
            }
            row = resealed
        }
        do {
            try store.insert(row)
        } catch let error as StorageError where error.kind == .constraint {
            return .skipped
        }
        return .restored
    }

    /// Whether the item here wins over the backup's copy: a later `mdat`, or the same and a `sha1`
    /// that sorts first. A backup's date in the future counts as now, so no file can win by its date.
    private static func isNewer(_ local: ItemRecord, than restored: ItemRecord, now: Date) -> Bool {
        let restoredDate = min(restored.modificationDate, now)
        if local.modificationDate != restoredDate { return local.modificationDate > restoredDate }
        let a = local.attributes["sha1"]?.bytes ?? Data()
        let b = restored.attributes["sha1"]?.bytes ?? Data()
        return a.lexicographicallyPrecedes(b) || a == b
    }
}
