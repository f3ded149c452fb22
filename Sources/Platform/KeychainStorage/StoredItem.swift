import FoundationEssentials

/// One row of the `items` table, exactly as stored: every attribute value is inside the sealed
/// `metadata` and `secret` blobs, and the searchable columns hold keyed digests only.
public struct StoredItem: Sendable, Equatable {
    public var rowID: Int64
    /// 16 random bytes naming the row for its whole life; bound into the blobs' authenticated data.
    public var persistentID: Data
    /// Item class number (see the engine's `ItemClass`).
    public var itemClass: Int
    /// Protection class number (see the keybag's `ProtectionClass`): which class key wraps the item keys.
    public var protectionClass: Int
    /// Keyed digest of the access group.
    public var accessGroupDigest: Data
    public var synchronizable: Bool
    public var tombstone: Bool
    /// Keyed digest of the full primary key; UNIQUE.
    public var primaryKeyDigest: Data
    /// Keyed digest of the primary key without its rarely-set parts; indexed, not unique.
    public var lookupDigest: Data
    public var metadata: Data
    public var secret: Data
    /// Keyed digests of every searchable attribute value, one index entry each.
    public var indexDigests: [Data]

    public init(
        rowID: Int64 = 0, persistentID: Data, itemClass: Int, protectionClass: Int, accessGroupDigest: Data,
        synchronizable: Bool, tombstone: Bool, primaryKeyDigest: Data, lookupDigest: Data, metadata: Data,
        secret: Data, indexDigests: [Data] = []
    ) {
        self.rowID = rowID
        self.persistentID = persistentID
        self.itemClass = itemClass
        self.protectionClass = protectionClass
        self.accessGroupDigest = accessGroupDigest
        self.synchronizable = synchronizable
        self.tombstone = tombstone
        self.primaryKeyDigest = primaryKeyDigest
        self.lookupDigest = lookupDigest
        self.metadata = metadata
        self.secret = secret
        self.indexDigests = indexDigests
    }
}
