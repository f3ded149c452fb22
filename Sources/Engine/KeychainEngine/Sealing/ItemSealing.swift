import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainStorage

/// Turning an item into the row that stores it; `ItemDecryption` is the way back.
enum ItemSealing {
    /// Seals a record into a row: encrypted blobs and keyed digests.
    /// A record whose access control guards its secret needs `factors` (`AuthenticationBroker`).
    /// A guarded record from another keychain (a restore) brings its secret `carried`, sealed as it was.
    static func seal(
        _ record: ItemRecord, classKey: SecureBytes, digests: ItemDigests, factors: SecretFactors? = nil,
        carried: ItemCrypto.CarriedSecret? = nil
    ) throws -> StoredItem {
        let guarded = record.accessControl?.guardsSecret == true
        guard !guarded || factors != nil || carried != nil else {
            throw KeychainError.internalError("a guarded item was sealed without its factors")
        }
        guard carried == nil || (guarded && factors == nil) else {
            throw KeychainError.internalError("a carried secret belongs to a guarded item, sealed without factors")
        }
        let lookupDigest = try digests.lookup(
            itemClass: record.itemClass, attributes: record.attributes, accessGroup: record.accessGroup,
            synchronizable: record.synchronizable)
        let binding = RowBinding(record: record, lookupDigest: lookupDigest)
        // The row's four nonces (two blobs, each a wrapped key and a content) from one draw.
        var nonces = NonceBatch(expected: 4)
        let metadata = try ItemCrypto.seal(
            ItemRecordCoding.encodeMetadata(record), part: .metadata, binding: binding, classKey: classKey,
            nonces: &nonces)
        let secret: Data
        if let carried {
            secret = try ItemCrypto.seal(carried: carried, part: .secret, binding: binding, classKey: classKey)
        } else {
            secret = try ItemCrypto.seal(
                ItemRecordCoding.encodeSecret(record.secret), part: .secret, binding: binding, classKey: classKey,
                factors: guarded ? factors : nil, nonces: &nonces)
        }
        return StoredItem(
            persistentID: record.persistentID, itemClass: record.itemClass.rawValue,
            protectionClass: record.protection.rawValue, accessGroupDigest: try digests.accessGroup(record.accessGroup),
            synchronizable: record.synchronizable, tombstone: record.tombstone,
            primaryKeyDigest: try digests.primaryKey(
                itemClass: record.itemClass, attributes: record.attributes, accessGroup: record.accessGroup,
                synchronizable: record.synchronizable),
            lookupDigest: lookupDigest, metadata: metadata, secret: secret,
            indexDigests: try digests.indexEntries(for: record))
    }
}
