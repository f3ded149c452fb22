import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine

/// A Secret Service item as the bus sees it: a generic password of the keychain.
struct SecretServiceItem {
    /// The item's persistent reference: its object path is made from it, and finds it again.
    var reference: Data
    var collection: String
    var label: String
    /// The attributes the bus shows: the item's map, with `service` and `account` from the keychain's
    /// own attributes of those names.
    var attributes: [String: String]
    var contentType: String
    var created: Date
    var modified: Date
}

/// The Secret Service's items in the keychain, for one caller's access groups. Every item is a generic
/// password: `service` and `account` in its attribute map are the keychain's `kSecAttrService` and
/// `kSecAttrAccount` (so SecItem and the bus see one item), the rest of the map its `ssat` attribute,
/// indexed pair by pair; the label, dates and secret are the item's own. Items made over the bus also
/// carry an object id (`ssid`), so that two may share every attribute, and their collection (`ssco`,
/// absent for the default collection).
struct SecretServiceStore {
    let keychain: Keychain
    let client: ClientIdentity
    /// The collections that exist: an item of one that was deleted (by another app, which could not
    /// see it) shows in the default collection.
    var collections: Set<String>? = nil

    static let defaultCollection = "login"
    static let defaultContentType = "text/plain"
    /// The largest secret the bus may store (1 MiB): more than any password or token, and a bound on
    /// what one call makes the daemon seal.
    static let maximumSecret = 1 << 20

    private static let serviceAttribute = "service"
    private static let accountAttribute = "account"

    /// The keychain query that finds the items whose attributes include `attributes`.
    private func query(_ attributes: [String: String]) throws(KeychainError) -> [String: ItemValue] {
        var query: [String: ItemValue] = ["class": .string("genp")]
        var rest = attributes
        if let service = rest.removeValue(forKey: Self.serviceAttribute) { query["svce"] = .string(service) }
        if let account = rest.removeValue(forKey: Self.accountAttribute) { query["acct"] = .string(account) }
        if !rest.isEmpty { query[SecretServiceAttributes.attributeName] = .data(try Self.map(rest).encoded) }
        return query
    }

    private static func map(_ pairs: [String: String]) throws(KeychainError) -> SecretServiceAttributes {
        do { return try SecretServiceAttributes(pairs) } catch {
            throw KeychainError.invalidParameter("attributes refused: \(error.reason)")
        }
    }

    /// The items (in `collection`, or in all) whose attributes include `attributes`. An empty result is
    /// not an error; a locked keychain is (`interactionNotAllowed`).
    func search(_ attributes: [String: String], collection: String?) throws(KeychainError) -> [SecretServiceItem] {
        var query = try query(attributes)
        query["r_Attributes"] = .bool(true)
        query["r_PersistentRef"] = .bool(true)
        query["m_Limit"] = .string("m_LimitAll")
        let result: ItemResult?
        do {
            result = try run { try keychain.copyMatching(query, client: client) }
        } catch  where error.code == .itemNotFound {
            return []
        }
        var items: [SecretServiceItem] = []
        func add(_ result: ItemResult) {
            guard case .dictionary(let dictionary) = result, let item = self.item(dictionary) else { return }
            if let collection, item.collection != collection { return }
            items.append(item)
        }
        switch result {
        case .array(let results): results.forEach(add)
        case .some(let one): add(one)
        case nil: break
        }
        return items
    }

    /// The item at `reference`, if the caller may see it.
    func item(_ reference: Data) throws(KeychainError) -> SecretServiceItem? {
        let query: [String: ItemValue] = [
            "class": .string("genp"), "v_PersistentRef": .data(reference), "r_Attributes": .bool(true),
            "r_PersistentRef": .bool(true),
        ]
        do {
            guard case .dictionary(let dictionary) = try run({ try keychain.copyMatching(query, client: client) })
            else { return nil }
            return self.item(dictionary)
        } catch  where error.code == .itemNotFound || error.code == .invalidParameter {
            // A path whose reference is not one the keychain makes names nothing.
            return nil
        }
    }

    /// The secret of the item at `reference`.
    func secret(_ reference: Data) throws(KeychainError) -> SecureBytes {
        let query: [String: ItemValue] = [
            "class": .string("genp"), "v_PersistentRef": .data(reference), "r_Data": .bool(true),
        ]
        switch try run({ try keychain.copyMatching(query, client: client) }) {
        case .secret(let secret): return secret
        case .data(let data): return SecureBytes(copying: data)
        default: throw KeychainError(.itemNotFound, "no such item")
        }
    }

    /// Stores a new item; with `replace`, an item of the collection with exactly these attributes is
    /// changed instead (the spec's `replace`). Returns the item's reference.
    func create(
        collection: String, label: String, attributes: [String: String], secret: SecureBytes, contentType: String,
        replace: Bool
    ) throws(KeychainError) -> Data {
        guard secret.count <= Self.maximumSecret else {
            throw KeychainError.invalidParameter("a secret over \(Self.maximumSecret) bytes")
        }
        if replace,
            let same = try search(attributes, collection: collection).first(where: { $0.attributes == attributes })
        {
            try change(same.reference, label: label, attributes: nil, secret: secret, contentType: contentType)
            return same.reference
        }
        var item = try query(attributes)
        if item[SecretServiceAttributes.attributeName] == nil {
            item[SecretServiceAttributes.attributeName] = .data(SecretServiceAttributes.empty.encoded)
        }
        item["ssid"] = .string(UUID().uuidString)
        if collection != Self.defaultCollection { item["ssco"] = .string(collection) }
        item["labl"] = .string(label)
        item["ssct"] = .string(contentType)
        item["v_Data"] = .secret(secret)
        item["r_PersistentRef"] = .bool(true)
        guard case .data(let reference) = try run({ try keychain.add(item, client: client) }) else {
            throw KeychainError.internalError("an added item came back without its reference")
        }
        return reference
    }

    /// Changes what is given of the item at `reference`.
    func change(
        _ reference: Data, label: String? = nil, attributes: [String: String]? = nil, secret: SecureBytes? = nil,
        contentType: String? = nil
    ) throws(KeychainError) {
        var changes: [String: ItemValue] = [:]
        if let label { changes["labl"] = .string(label) }
        if let attributes {
            var rest = attributes
            changes["svce"] = .string(rest.removeValue(forKey: Self.serviceAttribute) ?? "")
            changes["acct"] = .string(rest.removeValue(forKey: Self.accountAttribute) ?? "")
            changes[SecretServiceAttributes.attributeName] = .data(try Self.map(rest).encoded)
        }
        if let secret {
            guard secret.count <= Self.maximumSecret else {
                throw KeychainError.invalidParameter("a secret over \(Self.maximumSecret) bytes")
            }
            changes["v_Data"] = .secret(secret)
        }
        if let contentType { changes["ssct"] = .string(contentType) }
        guard !changes.isEmpty else { return }
        try run {
            try keychain.update(
                ["class": .string("genp"), "v_PersistentRef": .data(reference)], attributes: changes, client: client)
        }
    }

    func delete(_ reference: Data) throws(KeychainError) {
        try run {
            try keychain.delete(["class": .string("genp"), "v_PersistentRef": .data(reference)], client: client)
        }
    }

    private func run<T>(_ body: () throws -> T) throws(KeychainError) -> T { try KeychainDaemon.engine(body) }

    /// An item from the attributes the keychain returned.
    private func item(_ dictionary: [String: ItemValue]) -> SecretServiceItem? {
        guard var item = Self.item(dictionary) else { return nil }
        if let collections, !collections.contains(item.collection) { item.collection = Self.defaultCollection }
        return item
    }

    private static func item(_ dictionary: [String: ItemValue]) -> SecretServiceItem? {
        guard case .data(let reference) = dictionary["v_PersistentRef"] else { return nil }
        func text(_ name: String) -> String? {
            switch dictionary[name] {
            case .string(let text): text
            case .data(let bytes): String(data: bytes, encoding: .utf8)
            case .integer(let number): String(number)
            default: nil
            }
        }
        var attributes: [String: String] = [:]
        if case .data(let bytes) = dictionary[SecretServiceAttributes.attributeName],
            let map = try? SecretServiceAttributes(decoding: bytes)
        {
            attributes = map.pairs
        }
        if let service = text("svce"), !service.isEmpty { attributes[serviceAttribute] = service }
        if let account = text("acct"), !account.isEmpty { attributes[accountAttribute] = account }
        func date(_ name: String) -> Date {
            if case .date(let date) = dictionary[name] { return date }
            return Date(timeIntervalSince1970: 0)
        }
        return SecretServiceItem(
            reference: reference, collection: text("ssco") ?? defaultCollection, label: text("labl") ?? "",
            attributes: attributes, contentType: text("ssct") ?? defaultContentType, created: date("cdat"),
            modified: date("mdat"))
    }
}
