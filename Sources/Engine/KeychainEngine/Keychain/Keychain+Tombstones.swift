import FoundationEssentials
import KeychainCrypto
import KeychainStorage

/// Tombstones: what a deleted synchronizable item leaves behind, so that sync learns of the deletion.
extension Keychain {
    /// A tombstone keeps an item's primary key (so sync learns of the deletion) and nothing else. A
    /// deleted item's tombstone keeps its persistent reference too, which is its record id in sync;
    /// the tombstone an update leaves behind (the item moved to another primary key) gets a new one.
    func insertTombstone(for record: ItemRecord, store: ItemStore, digests: ItemDigests, keepingIdentity: Bool = false)
        throws
    {
        var attributes: [String: ItemValue] = [:]
        for name in AttributeSchema.primaryKey(record.itemClass) + AttributeSchema.uniquenessOnly {
            attributes[name] = record.attributes[name]
        }
        let now = clock.now()
        attributes["cdat"] = record.attributes["cdat"]
        attributes["mdat"] = .date(now)
        let tombstone = ItemRecord(
            itemClass: record.itemClass, persistentID: keepingIdentity ? record.persistentID : try Random.bytes(16),
            protection: record.protection,
            accessGroup: record.accessGroup, synchronizable: record.synchronizable, tombstone: true,
            attributes: attributes, accessControl: nil, secret: nil)
        let row = try ItemSealing.seal(
            tombstone, classKey: try keybag.classKey(for: record.protection), digests: digests)
        do {
            // An older tombstone (or a corrupt row) in the slot gives way; a live item keeps it.
            try insertNew(row, store: store)
        } catch let error as KeychainError where error.code == .duplicateItem {}
    }
}
