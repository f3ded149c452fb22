import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag
import KeychainStorage

/// Which secret an enclave key's record carries once opened.
enum EnclaveKeyPart {
    /// Its public key: what every read returns as its data.
    case publicKey
    /// Its private key wrapped by the device root: only to use the key, or to re-seal it on update.
    case wrappedPrivateKey
}

/// Opening a row's blobs into an `ItemRecord`.
enum ItemDecryption {
    /// The record, or nil when the row is corrupt or tampered with (logged, never returned).
    ///
    /// - Parameter enclaveKey: for an enclave key, whether `needSecret` means its wrapped private key
    ///   (to use or re-seal it) rather than its public key, which is what every read gives.
    static func open(
        _ row: StoredItem, protection: ProtectionClass, classKey: SecureBytes, needSecret: Bool,
        enclaveKey: EnclaveKeyPart = .publicKey
    ) -> ItemRecord? {
        guard let itemClass = ItemClass(rawValue: row.itemClass) else { return nil }
        let binding = RowBinding(row: row, itemClass: itemClass, protection: protection)
        do {
            let metadataBytes = try ItemCrypto.open(row.metadata, part: .metadata, binding: binding, classKey: classKey)
            let metadata = try ItemRecordCoding.decodeMetadata(metadataBytes)
            var record = ItemRecord(
                itemClass: itemClass, persistentID: row.persistentID, protection: protection,
                accessGroup: metadata.accessGroup, synchronizable: metadata.synchronizable,
                tombstone: metadata.tombstone, attributes: metadata.attributes,
                accessControl: metadata.accessControl, secret: nil)
            record.biometryBinding = metadata.biometryBinding
            record.enclavePublicKey = metadata.enclavePublicKey
            if needSecret {
                if let publicKey = metadata.enclavePublicKey, enclaveKey == .publicKey {
                    record.secret = SecureBytes(copying: publicKey)
                } else {
                    record.secret = try openSecret(row, binding: binding, classKey: classKey)
                }
            }
            return record
        } catch {
            KeychainLog.error("an item failed its integrity check and is treated as corrupt")
            return nil
        }
    }

    /// Whether both of a row's blobs are sound: what decides if a new item may take its slot. A
    /// guarded secret cannot be opened without its factors, so for it the wrapped item key is what is
    /// checked: it opens with the class key alone, and tampering breaks it.
    static func isIntact(_ row: StoredItem, protection: ProtectionClass, classKey: SecureBytes) -> Bool {
        guard open(row, protection: protection, classKey: classKey, needSecret: false) != nil,
            let itemClass = ItemClass(rawValue: row.itemClass)
        else { return false }
        let binding = RowBinding(row: row, itemClass: itemClass, protection: protection)
        do {
            _ = try openSecret(row, binding: binding, classKey: classKey)
            return true
        } catch ItemCrypto.Failure.needsFactors {
            return true
        } catch {
            return false
        }
    }

    /// The secret alone: for a lookup by primary key that returns only data. The blob's binding covers
    /// the lookup digest, access group and flags the query was matched on, so the attributes need not
    /// be opened to know the secret belongs to the item asked for.
    static func openSecretOnly(_ row: StoredItem, protection: ProtectionClass, classKey: SecureBytes) -> ItemRecord? {
        guard let itemClass = ItemClass(rawValue: row.itemClass) else { return nil }
        let binding = RowBinding(row: row, itemClass: itemClass, protection: protection)
        do {
            var record = ItemRecord(
                itemClass: itemClass, persistentID: row.persistentID, protection: protection, accessGroup: "",
                synchronizable: row.synchronizable, tombstone: row.tombstone, attributes: [:], accessControl: nil,
                secret: nil)
            record.secret = try openSecret(row, binding: binding, classKey: classKey)
            return record
        } catch {
            KeychainLog.error("an item failed its integrity check and is treated as corrupt")
            return nil
        }
    }

    private static func openSecret(_ row: StoredItem, binding: RowBinding, classKey: SecureBytes) throws
        -> SecureBytes?
    {
        let bytes = try ItemCrypto.openSecret(row.secret, part: .secret, binding: binding, classKey: classKey)
        return try ItemRecordCoding.decodeSecret(bytes)
    }

    /// The secret of a guarded item (its access control asks for factors), opened with `factors`.
    /// Throws `ItemCrypto.Failure.factorsRejected` when they do not open it (a changed enrollment, a
    /// wrong application password); nil when the row is otherwise corrupt (logged).
    static func openGuardedSecret(
        _ row: StoredItem, protection: ProtectionClass, classKey: SecureBytes,
        factors: SecretFactors
    ) throws -> SecureBytes?? {
        guard let itemClass = ItemClass(rawValue: row.itemClass) else { return nil }
        let binding = RowBinding(row: row, itemClass: itemClass, protection: protection)
        do {
            let bytes = try ItemCrypto.openSecret(
                row.secret, part: .secret, binding: binding, classKey: classKey, factors: factors)
            return .some(try ItemRecordCoding.decodeSecret(bytes))
        } catch ItemCrypto.Failure.factorsRejected {
            throw ItemCrypto.Failure.factorsRejected
        } catch {
            KeychainLog.error("an item failed its integrity check and is treated as corrupt")
            return nil
        }
    }
}
