import FoundationEssentials
import KeychainKeybag
import KeychainStorage

/// What a row's blobs are bound to: everything in its clear columns that a query relies on.
struct RowBinding {
    var identity: Data
    var itemClass: ItemClass
    var protection: ProtectionClass
    var synchronizable: Bool
    var tombstone: Bool
    var lookupDigest: Data

    init(row: StoredItem, itemClass: ItemClass, protection: ProtectionClass) {
        self.identity = row.persistentID
        self.itemClass = itemClass
        self.protection = protection
        self.synchronizable = row.synchronizable
        self.tombstone = row.tombstone
        self.lookupDigest = row.lookupDigest
    }

    init(record: ItemRecord, lookupDigest: Data) {
        self.identity = record.persistentID
        self.itemClass = record.itemClass
        self.protection = record.protection
        self.synchronizable = record.synchronizable
        self.tombstone = record.tombstone
        self.lookupDigest = lookupDigest
    }
}
