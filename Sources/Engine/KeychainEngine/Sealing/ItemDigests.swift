import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import Synchronization

/// The keyed digests in the searchable columns: HMAC-SHA256 under the keychain's index key,
/// truncated to 128 bits. Without the key (which the device root wraps) they reveal nothing about the
/// values, not even which items share a value across two keychains.
///
/// Every digest input starts with a domain tag and length-prefixes each component, so no two
/// different inputs produce the same byte string.
final class ItemDigests: Sendable {
    let key: HMACKey
    static let size = 16
    /// Access-group digests are asked for on every query, for the same few groups.
    private let groupCache = Mutex<[String: Data]>([:])
    /// The digest sets of whole group lists (one per client, in practice).
    private let groupSetCache = Mutex<[[String]: Set<Data>]>([:])

    init(indexKey: SecureBytes) throws {
        key = try HMACKey(key: indexKey)
    }

    func accessGroup(_ group: String) throws -> Data {
        if let cached = groupCache.withLock({ $0[group] }) { return cached }
        let computed = try digest("agrp", [Data(group.utf8)])
        groupCache.withLock { cache in
            if cache.count > 1_000 { cache.removeAll() }
            cache[group] = computed
        }
        return computed
    }

    /// The digests of a caller's groups, as a set to test rows against.
    func accessGroups(_ groups: [String]) throws -> Set<Data> {
        if let cached = groupSetCache.withLock({ $0[groups] }) { return cached }
        let computed = try Set(groups.map { try accessGroup($0) })
        groupSetCache.withLock { cache in
            if cache.count > 100 { cache.removeAll() }
            cache[groups] = computed
        }
        return computed
    }

    /// Index entries of one attribute value: one, or one per pair of an attribute map.
    func attributeEntries(_ name: String, _ value: ItemValue, kind: AttributeKind, itemClass: ItemClass) throws
        -> [(term: String, digest: Data)]
    {
        guard kind == .attributeMap else {
            return [(name, try attribute(name, value, kind: kind, itemClass: itemClass))]
        }
        guard case .data(let bytes) = value else { return [] }
        let map: SecretServiceAttributes
        do { map = try SecretServiceAttributes(decoding: bytes) } catch {
            throw KeychainError.invalidParameter("\(name) is not an attribute map: \(error.reason)")
        }
        // The pair's own domain and components: no pair digest equals a plain attribute's.
        return try map.sorted.map { pair in
            (
                name + "\u{0}" + pair.key,
                try digest(
                    "pair",
                    [Data([UInt8(itemClass.rawValue)]), Data(name.utf8), Data(pair.key.utf8), Data(pair.value.utf8)])
            )
        }
    }

    /// Index entry of one attribute value.
    func attribute(_ name: String, _ value: ItemValue, kind: AttributeKind, itemClass: ItemClass) throws -> Data {
        try digest(
            "attr",
            [Data([UInt8(itemClass.rawValue)]), Data(name.utf8), AttributeCodec.canonicalBytes(value, kind: kind)])
    }

    /// The lookup digest: class primary key, access group and synchronizable.
    func lookup(itemClass: ItemClass, attributes: [String: ItemValue], accessGroup: String, synchronizable: Bool)
        throws -> Data
    {
        try digest("lookup", lookupComponents(itemClass, attributes, accessGroup, synchronizable))
    }

    /// The uniqueness digest: the lookup components plus view hint and token id.
    func primaryKey(itemClass: ItemClass, attributes: [String: ItemValue], accessGroup: String, synchronizable: Bool)
        throws -> Data
    {
        var components = lookupComponents(itemClass, attributes, accessGroup, synchronizable)
        for name in AttributeSchema.uniquenessOnly {
            let value = attributes[name] ?? .string("")
            components.append(AttributeCodec.canonicalBytes(value, kind: .string))
        }
        if let value = attributes[AttributeSchema.uniquenessWhenPresent] {
            components.append(AttributeCodec.canonicalBytes(value, kind: .string))
        }
        return try digest("pk", components)
    }

    /// Index entries for every stored attribute of a record.
    func indexEntries(for record: ItemRecord) throws -> [Data] {
        var entries: [Data] = []
        for (name, value) in record.attributes {
            guard let descriptor = AttributeSchema.descriptor(name, in: record.itemClass) else { continue }
            for entry in try attributeEntries(name, value, kind: descriptor.kind, itemClass: record.itemClass) {
                entries.append(entry.digest)
            }
        }
        return entries
    }

    private func lookupComponents(
        _ itemClass: ItemClass, _ attributes: [String: ItemValue], _ accessGroup: String, _ synchronizable: Bool
    ) -> [Data] {
        let primaryKey = AttributeSchema.primaryKey(itemClass)
        var components: [Data] = []
        components.reserveCapacity(primaryKey.count + 5)
        components.append(Data([UInt8(itemClass.rawValue)]))
        for name in primaryKey {
            guard let descriptor = AttributeSchema.descriptor(name, in: itemClass) else { continue }
            let value = attributes[name] ?? AttributeSchema.defaultValue(for: descriptor)
            components.append(AttributeCodec.canonicalBytes(value, kind: descriptor.kind))
        }
        components.append(Data(accessGroup.utf8))
        components.append(Data([synchronizable ? 1 : 0]))
        return components
    }

    /// A synchronizable item's whole payload, keyed: tells sync whether an item changed since it was
    /// last in step with the server, and nothing more. The payload (its secret too) goes straight into
    /// the MAC, never into a plain buffer.
    func syncPayload(_ payload: SecureBytes) throws -> Data {
        let domain = Data("sync\u{0}".utf8)
        return try domain.withUnsafeBytes { domainBytes in
            try payload.withUnsafeBytes { try key.authenticationCode([domainBytes, $0]).prefix(Self.size) }
        }
    }

    private func digest(_ domain: String, _ components: [Data]) throws -> Data {
        var message: [UInt8] = []
        message.reserveCapacity(domain.utf8.count + 1 + components.reduce(0) { $0 + 4 + $1.count })
        message.append(contentsOf: domain.utf8)
        message.append(0)
        for component in components {
            let count = UInt32(component.count)
            message.append(contentsOf: [
                UInt8(count & 0xff), UInt8(count >> 8 & 0xff), UInt8(count >> 16 & 0xff), UInt8(count >> 24),
            ])
            message.append(contentsOf: component)
        }
        return try message.withUnsafeBytes { try key.authenticationCode([$0]) }.prefix(Self.size)
    }
}
