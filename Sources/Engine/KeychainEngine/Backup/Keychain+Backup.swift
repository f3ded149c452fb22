import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag
import KeychainStorage
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Backups of the whole keychain with iOS's rules (`BackupKeybag`, `BackupHeader`): made and restored
/// here, in this process or in the daemon, streaming item by item.
extension Keychain {
    /// Writes a backup of this keychain to `path`: with a password, the migrating classes restore onto
    /// any keychain that is given it and the `ThisDeviceOnly` ones only onto this one; without, every
    /// class restores only onto this one. Never in a backup: `WhenPasscodeSetThisDeviceOnly` items,
    /// token items (enclave keys) and tombstones; each is counted. An item whose access control guards
    /// its secret with secrets alone (an application password, the enrolled biometry set, the device
    /// passcode: every requirement one its content key is derived from) travels without the user: its
    /// item key is opened with the class key and its content is carried still sealed under its
    /// factors, so that the password is still needed wherever it is restored, and what is bound to
    /// this device's biometry or passcode opens nowhere else. One whose access control asks for the
    /// user in any other way (presence, any biometry, a companion, alternatives) is left out and
    /// counted, as Apple's backups leave it out: its sealed content would open with the item key alone.
    ///
    /// The file is written beside `path` under a temporary name and renamed onto it when complete, so
    /// `path` never holds a partial backup; a link or directory at `path` is never written through.
    ///
    /// - Parameter passwordFunction: how the password is stretched: at least
    ///   `Keychain.backupPasswordFunction`, at most 1 GiB of memory.
    public func createBackup(
        at path: String, password: SecureBytes?, passwordFunction: PasscodeFunction? = nil,
        progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> BackupSummary {
        let target = try BackupTarget(path: path)
        do {
            let summary = try createBackup(
                into: target.descriptor, password: password, passwordFunction: passwordFunction, progress: progress)
            try target.commit()
            return summary
        } catch {
            target.abandon()
            throw error
        }
    }

    /// Writes a backup into `descriptor`, a new empty regular file opened for writing: what a daemon does
    /// with the file its caller opened and passed over the socket. The caller renames it into place
    /// (and removes it when this throws); the descriptor stays the caller's.
    public func createBackup(
        into descriptor: Int32, password: SecureBytes?, passwordFunction: PasscodeFunction? = nil,
        progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> BackupSummary {
        try perform {
            var info = stat()
            guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size == 0 else {
                throw KeychainError.invalidParameter("a backup is written into a new, empty regular file")
            }
            let function = passwordFunction ?? BackupKeybag.minimumPasswordFunction
            guard BackupKeybag.isAcceptable(function) else {
                throw KeychainError.invalidParameter(
                    "the backup password function is below the minimum (\(BackupKeybag.minimumPasswordFunction)) or above 1 GiB"
                )
            }
            if let password, password.count == 0 {
                throw KeychainError.invalidParameter(
                    "an empty backup password; give none for a backup of this device only")
            }
            let status = keybag.status
            if status.passcodeSet, status.lockState != .unlocked {
                throw KeychainError.interactionNotAllowed("the keychain is locked: unlock it to back it up")
            }
            let (backupKeybag, header) = try BackupKeybag.make(
                password: password, function: function, keybag: keybag, now: clock.now())
            let counts = try writeBackup(to: descriptor, keybag: backupKeybag, header: header, progress: progress)
            return counts.summary(of: header)
        }
    }

    /// A backup to `file`: by its path, or into a descriptor the caller opened.
    public func createBackup(
        to file: BackupFile, password: SecureBytes?, progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> BackupSummary {
        switch file {
        case .path(let path): try createBackup(at: path, password: password, progress: progress)
        case .descriptor(let descriptor): try createBackup(into: descriptor, password: password, progress: progress)
        }
    }

    /// A restore from `file`: by its path, or from a descriptor the caller opened.
    public func restoreBackup(
        from file: BackupFile, password: SecureBytes?, progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> RestoreReport {
        switch file {
        case .path(let path): try restoreBackup(from: path, password: password, progress: progress)
        case .descriptor(let descriptor):
            try restoreBackup(fromDescriptor: descriptor, password: password, progress: progress)
        }
    }

    /// Every class key available now, taken once for a whole backup or restore: a lock that lands
    /// meanwhile (another client's, through the daemon) then changes nothing of it, rather than leaving
    /// items out or unreadable halfway.
    func availableClassKeys() -> [ProtectionClass: SecureBytes] {
        var keys: [ProtectionClass: SecureBytes] = [:]
        for protection in ProtectionClass.allCases {
            if let key = try? keybag.classKey(for: protection) { keys[protection] = key }
        }
        return keys
    }

    /// The least the backup password is stretched with (scrypt; see `BackupKeybag`).
    public static var backupPasswordFunction: PasscodeFunction { BackupKeybag.minimumPasswordFunction }

    /// What a backup file's header and summary say: no password needed, and nothing in it is secret.
    /// Unauthenticated: only a restore, which checks the whole file, proves it.
    public static func backupSummary(of path: String) throws -> BackupSummary {
        let file = try BackupSource(path: path)
        defer { file.close() }
        let input = file.input()
        let (header, _) = try BackupHeader.read(from: input)
        let trailer = BackupCounts.encodedSize + 32
        guard file.size - input.offset >= 4 + 4 + trailer else {
            throw KeychainError.decode("the backup file is truncated")
        }
        let summaryBytes = try file.readAt(file.size - trailer, count: BackupCounts.encodedSize)
        let (uuid, counts) = try BackupCounts.decode(summaryBytes)
        guard uuid == header.uuid else {
            throw KeychainError.decode("the backup file's summary belongs to another backup (keybag UUID mismatch)")
        }
        return counts.summary(of: header)
    }

    private func writeBackup(
        to descriptor: Int32, keybag backupKeybag: BackupKeybag, header: BackupHeader,
        progress: ((Int, Int) -> Void)?
    ) throws -> BackupCounts {
        let output = BackupOutput(descriptor: descriptor)
        try output.startAuthenticating(with: try backupKeybag.macKey(), header: header.encoded())
        var counts = BackupCounts()
        let localKeys = availableClassKeys()
        try pool.withConnection { connection in
            // One read transaction: the backup is the keychain at one moment (the log's snapshot), whatever
            // other clients write while it is made.
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            let store = ItemStore(connection: connection)
            let total = try ItemClass.allCases.reduce(0) {
                $0 + (try store.count(itemClass: $1.rawValue, tombstone: false))
            }
            var nonces = NonceBatch(expected: total)
            var done = 0
            for itemClass in ItemClass.allCases {
                try store.forEachItem(itemClass: itemClass.rawValue, tombstone: false) { row in
                    defer {
                        done += 1
                        progress?(done, total)
                    }
                    switch backupItem(of: row, keys: localKeys) {
                    case .skipped(let reason): counts.skipped[reason, default: 0] += 1
                    case .item(let item):
                        guard let classKey = backupKeybag.classKeys[item.protection] else {
                            throw KeychainError.internalError("a backup without the key of a class it carries")
                        }
                        let plaintext = BackupItemCoding.encode(item)
                        guard plaintext.count + AESGCM.overhead + 2 <= BackupHeader.maximumItem else {
                            counts.skipped[.tooLarge, default: 0] += 1
                            return
                        }
                        let sealed = try AESGCM.seal(
                            plaintext, key: classKey,
                            authenticating: backupKeybag.itemContext(
                                protection: item.protection, itemClass: item.itemClass),
                            nonces: &nonces)
                        // Its classes in the clear, which say which key opens it (the summary counts them anyway).
                        var entry = ByteWriter()
                        entry.write(UInt32(sealed.count + 2))
                        entry.write(UInt8(item.protection.rawValue))
                        entry.write(UInt8(item.itemClass.rawValue))
                        entry.writeRaw(sealed)
                        try output.write(entry.data)
                        counts.perClass[item.itemClass, default: 0] += 1
                        counts.perProtection[item.protection, default: 0] += 1
                    }
                }
            }
        }
        var end = ByteWriter()
        end.write(UInt32(0))
        let summary = counts.encoded(uuid: backupKeybag.uuid)
        end.write(UInt32(summary.count))
        end.writeRaw(summary)
        try output.write(end.data)
        try output.finish()
        return counts
    }

    private enum BackupEntry {
        case item(BackupItem)
        case skipped(BackupSkip)
    }

    /// A row as it goes into a backup, or why it does not. Its metadata and its secret go in as the
    /// row's blobs hold them once opened (the record formats a restore reads), so nothing is decoded
    /// but what decides whether the item travels; a guarded secret is carried still sealed, never
    /// opened (which would need the user).
    private func backupItem(of row: StoredItem, keys: [ProtectionClass: SecureBytes]) -> BackupEntry {
        guard let protection = ProtectionClass(rawValue: row.protectionClass),
            let itemClass = ItemClass(rawValue: row.itemClass)
        else { return .skipped(.unreadable) }
        if protection == .whenPasscodeSetThisDeviceOnly { return .skipped(.passcodeOnly) }
        guard let classKey = keys[protection] else { return .skipped(.unreadable) }
        let binding = RowBinding(row: row, itemClass: itemClass, protection: protection)
        let guarded = ItemCrypto.isGuarded(row.secret)
        do {
            let metadataBytes = try ItemCrypto.open(row.metadata, part: .metadata, binding: binding, classKey: classKey)
            // Only a key can be a token's (an enclave key), and only its attributes say so: the other
            // classes' need not be decoded.
            let accessControl: AccessControlPolicy?
            if itemClass == .key {
                let metadata = try ItemRecordCoding.decodeMetadata(metadataBytes)
                if let token = metadata.attributes["tkid"], token != .string("") { return .skipped(.tokenItem) }
                accessControl = metadata.accessControl
            } else {
                accessControl = try ItemRecordCoding.decodeAccessControl(metadataBytes)
            }
            // The attributes, which are authenticated, say whether the secret is guarded: a blob that
            // disagrees (a column rolled back or swapped) is damaged.
            guard guarded == (accessControl?.guardsSecret == true) else { return .skipped(.unreadable) }
            if let accessControl, guarded, !Self.travelsSealed(accessControl) { return .skipped(.needsUser) }
            let secret: BackupItem.Secret =
                guarded
                ? .carried(try ItemCrypto.carry(row.secret, part: .secret, binding: binding, classKey: classKey))
                : .stored(try ItemCrypto.openSecret(row.secret, part: .secret, binding: binding, classKey: classKey))
            return .item(
                BackupItem(
                    itemClass: itemClass, protection: protection, persistentID: row.persistentID,
                    metadata: metadataBytes, secret: secret))
        } catch {
            KeychainLog.error("an item failed its integrity check and is left out of the backup")
            return .skipped(.unreadable)
        }
    }
}

extension Keychain {
    /// Whether a guarded item's sealed content may go into a backup: when every requirement of its
    /// access control is a secret its content key is derived from, nothing in the backup opens it, and
    /// no access control that asks for less (a crafted backup could give it one) opens it either.
    static func travelsSealed(_ accessControl: AccessControlPolicy) -> Bool {
        guard let constraint = accessControl.constraint else { return accessControl.requiresApplicationPassword }
        return constraint.isBoundByFactorsAlone
    }
}

/// One item on its way into a backup: its classes, its persistent identity, its metadata plaintext and
/// its secret, in the formats the keychain stores them in.
struct BackupItem {
    enum Secret {
        /// The secret blob's plaintext (`ItemRecordCoding`'s secret format).
        case stored(SecureBytes)
        /// A guarded secret, still sealed under its factors.
        case carried(ItemCrypto.CarriedSecret)
    }

    let itemClass: ItemClass
    let protection: ProtectionClass
    let persistentID: Data
    let metadata: Data
    let secret: Secret
}

/// An item inside a backup, in the clear (it is sealed under its class's backup key):
///
///     item class (1) ‖ protection (1) ‖ persistent id (bytes) ‖ metadata (bytes, the stored record's
///     format) ‖ secret (bytes)
///
/// The secret is the stored secret's format (which starts with its version, 1), or a guarded
/// secret carried sealed: `0x80 ‖ salt (16) ‖ item key (bytes) ‖ content context (bytes) ‖ sealed
/// content (bytes)`. A build that knows only the first counts the second as an item it could not
/// restore.
enum BackupItemCoding {
    private static let carriedMarker: UInt8 = 0x80

    static func encode(_ item: BackupItem) -> SecureBytes {
        var writer = ByteWriter()
        writer.write(UInt8(item.itemClass.rawValue))
        writer.write(UInt8(item.protection.rawValue))
        writer.writeBytes(item.persistentID)
        writer.writeBytes(item.metadata)
        switch item.secret {
        case .stored(let plaintext):
            plaintext.withUnsafeBytes { writer.writeSecretBytes($0) }
        case .carried(let carried):
            var inner = ByteWriter()
            inner.write(carriedMarker)
            inner.writeRaw(carried.salt)
            carried.itemKey.withUnsafeBytes { inner.writeSecretBytes($0) }
            inner.writeBytes(carried.context)
            inner.writeBytes(carried.sealed)
            inner.takeSecure().withUnsafeBytes { writer.writeSecretBytes($0) }
        }
        return writer.takeSecure()
    }

    /// The record back, checked against the class it was sealed as, with its guarded secret when it
    /// was carried sealed; nil when it does not decode.
    static func decode(_ plaintext: SecureBytes, protection: ProtectionClass, itemClass: ItemClass)
        -> (record: ItemRecord, carried: ItemCrypto.CarriedSecret?)?
    {
        plaintext.withBorrowedData { data -> (ItemRecord, ItemCrypto.CarriedSecret?)? in
            var reader = ByteReader(data)
            guard let classByte = try? reader.read() as UInt8, Int(classByte) == itemClass.rawValue,
                let protectionByte = try? reader.read() as UInt8, Int(protectionByte) == protection.rawValue,
                let persistentID = try? reader.readBytes(), persistentID.count == 16,
                let metadataBytes = try? reader.readBytes(),
                let metadata = try? ItemRecordCoding.decodeMetadata(metadataBytes),
                let secretBytes = try? reader.readSecureBytes(), reader.isAtEnd
            else { return nil }
            var carried: ItemCrypto.CarriedSecret?
            var secret: SecureBytes?
            if secretBytes.withUnsafeBytes({ $0.first }) == carriedMarker {
                guard let parts = decodeCarried(secretBytes) else { return nil }
                carried = parts
            } else {
                guard let plain = try? ItemRecordCoding.decodeSecret(secretBytes) else { return nil }
                secret = plain
            }
            var record = ItemRecord(
                itemClass: itemClass, persistentID: persistentID, protection: protection,
                accessGroup: metadata.accessGroup, synchronizable: metadata.synchronizable,
                tombstone: metadata.tombstone, attributes: metadata.attributes, accessControl: metadata.accessControl,
                secret: secret)
            record.biometryBinding = metadata.biometryBinding
            record.enclavePublicKey = metadata.enclavePublicKey
            return (record, carried)
        }
    }

    private static func decodeCarried(_ bytes: SecureBytes) -> ItemCrypto.CarriedSecret? {
        bytes.withBorrowedData { data -> ItemCrypto.CarriedSecret? in
            var reader = ByteReader(data)
            guard (try? reader.read() as UInt8) == carriedMarker, let salt = try? reader.readRaw(16),
                let itemKey = try? reader.readSecureBytes(), let context = try? reader.readBytes(),
                let sealed = try? reader.readBytes(), reader.isAtEnd
            else { return nil }
            return ItemCrypto.CarriedSecret(salt: salt, itemKey: itemKey, context: context, sealed: sealed)
        }
    }
}
