import Foundation
import KeychainCrypto
import KeychainStorage

/// Turning an item into the row that stores it; `ItemDecryption` is the way back.
enum ItemSealing {
    /// Seals a record into a row: encrypted blobs and keyed digests.
    static func seal(_ record: ItemRecord, classKey: SecureBytes, digests: ItemDigests) throws -> StoredItem {
        let lookupDigest = try digests.lookup(
            itemClass: record.itemClass, attributes: record.attributes, accessGroup: record.accessGroup,
            synchronizable: record.synchronizable)
        let binding = RowBinding(record: record, lookupDigest: lookupDigest)
        return StoredItem(
            persistentID: record.persistentID, itemClass: record.itemClass.rawValue,
            protectionClass: record.protection.rawValue, accessGroupDigest: try digests.accessGroup(record.accessGroup),
            synchronizable: record.synchronizable, tombstone: record.tombstone,
            primaryKeyDigest: try digests.primaryKey(
                itemClass: record.itemClass, attributes: record.attributes, accessGroup: record.accessGroup,
                synchronizable: record.synchronizable),
            lookupDigest: lookupDigest,
            metadata: try ItemCrypto.seal(
                ItemRecordCoding.encodeMetadata(record), part: .metadata, binding: binding, classKey: classKey),
            secret: try ItemCrypto.seal(
                ItemRecordCoding.encodeSecret(record.secret), part: .secret, binding: binding, classKey: classKey),
            indexDigests: try digests.indexEntries(for: record))
    }
}
