import Foundation
import KeychainCrypto
import KeychainKeybag
import KeychainStorage

/// The four SecItem operations, with Apple's data-protection keychain semantics.
extension Keychain {
    /// `SecItemAdd`. Returns what the query's return keys ask for, or nil.
    public func add(_ dictionary: [String: ItemValue], client: ClientIdentity) throws -> ItemResult? {
        let query = try Query.parse(dictionary, for: .add)
        return try perform {
            try self.add(query, client: client)
        }
    }

    /// `SecItemCopyMatching`.
    public func copyMatching(_ dictionary: [String: ItemValue], client: ClientIdentity) throws
        -> ItemResult?
    {
        let query = try Query.parse(dictionary, for: .copyMatching)
        return try perform { try self.copyMatching(query, client: client) }
    }

    /// `SecItemUpdate`: changes every matching item in one transaction, or none.
    public func update(
        _ dictionary: [String: ItemValue], attributes changes: [String: ItemValue], client: ClientIdentity
    ) throws {
        let query = try Query.parse(dictionary, for: .update)
        try perform { try self.update(query, changes: changes, client: client) }
    }

    /// `SecItemDelete`: deletes every matching item.
    public func delete(_ dictionary: [String: ItemValue], client: ClientIdentity) throws {
        let query = try Query.parse(dictionary, for: .delete)
        try perform { try self.delete(query, client: client) }
    }

    /// Runs an operation after noticing keybag changes made by other processes (checked at most once
    /// a millisecond), translating failures.
    private func perform<T>(_ body: () throws -> T) throws -> T {
        do {
            try keybag.refreshIfChanged(maximumAge: 0.001)
            return try body()
        } catch {
            throw Self.translate(error)
        }
    }

    // MARK: Add

    /// Adds many items in one transaction: all of them, or none if any fails. Used to load items in
    /// bulk (benchmarks, and later restore); each dictionary is a SecItemAdd query.
    public func add(contentsOf dictionaries: [[String: ItemValue]], client: ClientIdentity) throws {
        let queries = try dictionaries.map { try Query.parse($0, for: .add) }
        try perform {
            let rows = try queries.map { try prepareAdd($0, client: client).row }
            try pool.withConnection { connection in
                let store = ItemStore(connection: connection)
                try connection.writeTransaction { for row in rows { try insertNew(row, store: store) } }
            }
        }
    }

    private func add(_ query: Query, client: ClientIdentity) throws -> ItemResult? {
        let (row, record) = try prepareAdd(query, client: client)
        try pool.withConnection { connection in
            let store = ItemStore(connection: connection)
            try connection.writeTransaction { try insertNew(row, store: store) }
        }
        guard query.returnsAnything else { return nil }
        return try ResultShape(query: query).result(for: [record])
    }

    /// Validates an add and seals the new item, ready for insertion.
    private func prepareAdd(_ query: Query, client: ClientIdentity) throws -> (row: StoredItem, record: ItemRecord) {
        guard let itemClass = query.itemClass, !query.isIdentity else {
            throw KeychainError.invalidParameter("identities are added as a certificate and a private key")
        }
        if query.hasValueReference {
            throw KeychainError.invalidParameter("kSecValueRef items are not supported for class \(itemClass.name)")
        }
        if query.persistentReference != nil {
            throw KeychainError.invalidParameter("kSecValuePersistentRef cannot be added")
        }
        if query.limitGiven {
            throw KeychainError.invalidParameter("kSecMatchLimit is not allowed in SecItemAdd")
        }
        let group = try groupForWriting(query.accessGroup, client: client)
        let protection = try protectionForAdding(query, itemClass: itemClass)
        let synchronizable: Bool
        switch query.synchronizable {
        case .none: synchronizable = false
        case .some(.none): throw KeychainError.invalidParameter("kSecAttrSynchronizableAny is a search value only")
        case .some(.some(let value)): synchronizable = value
        }
        // The class key first: adding a class-A item while locked fails even if it is a duplicate.
        let classKey = try keybag.classKey(for: protection)

        var attributes = query.attributes
        for name in AttributeSchema.primaryKey(itemClass) where attributes[name] == nil {
            if let descriptor = AttributeSchema.descriptor(name, in: itemClass) {
                attributes[name] = AttributeSchema.defaultValue(for: descriptor)
            }
        }
        let now = clock.now()
        attributes["cdat"] = .date(now)
        attributes["mdat"] = .date(now)
        var record = ItemRecord(
            itemClass: itemClass, persistentID: try Random.bytes(16), protection: protection, accessGroup: group,
            synchronizable: synchronizable, tombstone: false, attributes: attributes,
            accessControl: query.accessControl, secret: query.valueData)
        try record.updateDigest()
        return (try seal(record, classKey: classKey, digests: try digests()), record)
    }

    /// Inserts a new row; a tombstone or an undecryptable row in the same slot gives way, a live
    /// item does not (errSecDuplicateItem).
    private func insertNew(_ row: StoredItem, store: ItemStore) throws {
        do {
            try store.insert(row)
        } catch let error as StorageError where error.kind == .constraint {
            guard let existing = try store.item(primaryKeyDigest: row.primaryKeyDigest), try isReplaceable(existing)
            else { throw KeychainError.duplicateItem }
            try store.delete(rowID: existing.rowID)
            try store.insert(row)
        }
    }

    private func isReplaceable(_ row: StoredItem) throws -> Bool {
        if row.tombstone { return true }
        guard let protection = ProtectionClass(rawValue: row.protectionClass) else { return true }
        let classKey: SecureBytes
        do {
            classKey = try keybag.classKey(for: protection)
        } catch KeybagError.classUnavailable {
            return true
        } catch {
            return false  // locked: cannot tell, so it stays
        }
        return ItemDecryption.open(row, protection: protection, classKey: classKey, needSecret: false) == nil
    }

    private func protectionForAdding(_ query: Query, itemClass: ItemClass) throws -> ProtectionClass {
        if let policy = query.accessControl {
            guard let protection = ProtectionClass(attributeValue: policy.protection) else {
                throw KeychainError.invalidParameter("the access control has an invalid protection class")
            }
            try Self.checkAccessControlSupported(policy, synchronizable: query.synchronizable)
            return protection
        }
        return query.protection ?? (itemClass == .certificate ? .always : .whenUnlocked)
    }

    /// Access-control constraints (user presence, biometry, passcode, application password) are enforced
    /// by the access-control work that follows; until then such items are refused rather than stored
    /// unprotected. A policy with no flags is only a protection class and is accepted.
    static func checkAccessControlSupported(_ policy: AccessControlPolicy, synchronizable: Bool??) throws {
        if policy.flags != 0 {
            if case .some(.some(true)) = synchronizable {
                throw KeychainError.invalidParameter("an item with kSecAttrAccessControl cannot be synchronizable")
            }
            throw KeychainError.unimplemented("access-control constraints are not supported yet")
        }
    }

    // MARK: Copy matching

    private func copyMatching(_ query: Query, client: ClientIdentity) throws -> ItemResult? {
        if query.isIdentity { throw KeychainError.itemNotFound }
        guard let itemClass = query.itemClass else { throw KeychainError.itemNotFound }
        if query.hasValueReference {
            throw KeychainError.invalidParameter("kSecValueRef is not supported for class \(itemClass.name)")
        }
        let groups = try groupsForReading(query.accessGroup, client: client)
        // No read transaction: every candidate is re-checked after decryption, so a write landing
        // between two statements cannot make a wrong item match; it can only be seen or not.
        let matches = try pool.withConnection { connection in
            try search(query, itemClass: itemClass, groups: groups, store: ItemStore(connection: connection))
                .run(limit: query.limit.maximum, needSecret: query.returnData, needAttributes: query.returnAttributes)
        }
        guard !matches.isEmpty else { throw KeychainError.itemNotFound }
        guard query.returnsAnything else { return nil }
        return try ResultShape(query: query).result(for: matches.map(\.record))
    }

    // MARK: Update

    private func update(_ query: Query, changes: [String: ItemValue], client: ClientIdentity) throws {
        if query.isIdentity { throw KeychainError.itemNotFound }
        guard let itemClass = query.itemClass else { throw KeychainError.itemNotFound }
        if query.limitGiven, query.limit != .all {
            throw KeychainError.invalidParameter("kSecMatchLimit is not allowed in SecItemUpdate")
        }
        let change = try ItemChange.parse(changes, itemClass: itemClass)
        let groups = try groupsForWriting(query.accessGroup, client: client)
        if let newGroup = change.accessGroup {
            guard client.writableGroups.contains(newGroup) else {
                throw KeychainError.missingEntitlement(
                    "the new access group \(newGroup) is not one of this client's groups")
            }
        }
        let digests = try digests()
        try changingMatches(of: query, itemClass: itemClass, groups: groups, needSecret: true) { store, matches in
            for match in matches {
                var record = match.record
                try change.apply(to: &record, now: clock.now())
                let classKey = try keybag.classKey(for: record.protection)
                var row = try seal(record, classKey: classKey, digests: digests)
                row.rowID = match.row.rowID
                try replace(rowID: match.row.rowID, with: row, store: store)
                let keyChanged = row.primaryKeyDigest != match.row.primaryKeyDigest
                if keyChanged, match.record.synchronizable, query.useTombstones != false {
                    try insertTombstone(for: match.record, store: store, digests: digests)
                }
            }
        }
    }

    /// Finds every match inside one write transaction and hands them to `body`, which changes them;
    /// no match is errSecItemNotFound, and a throw from `body` rolls every change back.
    private func changingMatches(
        of query: Query, itemClass: ItemClass, groups: [String], needSecret: Bool,
        _ body: (ItemStore, [Match]) throws -> Void
    ) throws {
        try pool.withConnection { connection in
            let store = ItemStore(connection: connection)
            try connection.writeTransaction {
                let matches = try search(query, itemClass: itemClass, groups: groups, store: store)
                    .run(limit: Int.max, needSecret: needSecret)
                guard !matches.isEmpty else { throw KeychainError.itemNotFound }
                try body(store, matches)
            }
        }
    }

    /// Replaces a row; a collision with a tombstone or a corrupt row removes that row, one with a live
    /// item is a duplicate (and the caller's transaction rolls every change back).
    private func replace(rowID: Int64, with row: StoredItem, store: ItemStore) throws {
        do {
            try store.replace(rowID: rowID, with: row)
        } catch let error as StorageError where error.kind == .constraint {
            guard let existing = try store.item(primaryKeyDigest: row.primaryKeyDigest), existing.rowID != rowID,
                try isReplaceable(existing)
            else { throw KeychainError.duplicateItem }
            try store.delete(rowID: existing.rowID)
            try store.replace(rowID: rowID, with: row)
        }
    }

    // MARK: Delete

    private func delete(_ query: Query, client: ClientIdentity) throws {
        if query.isIdentity { throw KeychainError.itemNotFound }
        guard let itemClass = query.itemClass else { throw KeychainError.itemNotFound }
        // kSecMatchLimitAll is what macOS code passes to delete every match; it changes nothing here.
        if query.limitGiven, query.limit != .all {
            throw KeychainError.invalidParameter("kSecMatchLimit is not allowed in SecItemDelete")
        }
        let groups = try groupsForWriting(query.accessGroup, client: client)
        let digests = try digests()
        try changingMatches(of: query, itemClass: itemClass, groups: groups, needSecret: false) { store, matches in
            for match in matches {
                try store.delete(rowID: match.row.rowID)
                if query.useTombstones ?? match.record.synchronizable {
                    try insertTombstone(for: match.record, store: store, digests: digests)
                }
            }
        }
    }

    /// A tombstone keeps an item's primary key (so sync learns of the deletion) and nothing else.
    private func insertTombstone(for record: ItemRecord, store: ItemStore, digests: ItemDigests) throws {
        var attributes: [String: ItemValue] = [:]
        for name in AttributeSchema.primaryKey(record.itemClass) + AttributeSchema.uniquenessOnly {
            attributes[name] = record.attributes[name]
        }
        let now = clock.now()
        attributes["cdat"] = record.attributes["cdat"]
        attributes["mdat"] = .date(now)
        let tombstone = ItemRecord(
            itemClass: record.itemClass, persistentID: try Random.bytes(16), protection: record.protection,
            accessGroup: record.accessGroup, synchronizable: record.synchronizable, tombstone: true,
            attributes: attributes, accessControl: nil, secret: nil)
        let row = try seal(tombstone, classKey: try keybag.classKey(for: record.protection), digests: digests)
        do {
            // An older tombstone (or a corrupt row) in the slot gives way; a live item keeps it.
            try insertNew(row, store: store)
        } catch let error as KeychainError where error.code == .duplicateItem {}
    }

    // MARK: Helpers

    private func search(_ query: Query, itemClass: ItemClass, groups: [String], store: ItemStore) throws
        -> ItemSearch
    {
        ItemSearch(
            store: store, keybag: keybag, digests: try digests(), itemClass: itemClass, query: query, groups: groups)
    }

    /// Seals a record into a row: encrypted blobs and keyed digests.
    func seal(_ record: ItemRecord, classKey: SecureBytes, digests: ItemDigests) throws -> StoredItem {
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

    private func groupForWriting(_ explicit: String?, client: ClientIdentity) throws -> String {
        let writable = client.writableGroups
        if let explicit {
            guard writable.contains(explicit) else {
                throw KeychainError.missingEntitlement(
                    "the access group \(explicit) is not one of this client's writable groups")
            }
            return explicit
        }
        guard let first = writable.first else {
            throw KeychainError.missingEntitlement("the client has no keychain access groups")
        }
        return first
    }

    private func groupsForWriting(_ explicit: String?, client: ClientIdentity) throws -> [String] {
        if let explicit { return [try groupForWriting(explicit, client: client)] }
        let writable = client.writableGroups
        guard !writable.isEmpty else {
            throw KeychainError.missingEntitlement("the client has no keychain access groups")
        }
        return writable
    }

    private func groupsForReading(_ explicit: String?, client: ClientIdentity) throws -> [String] {
        if let explicit {
            guard client.accessGroups.contains(explicit) else {
                throw KeychainError.missingEntitlement(
                    "the access group \(explicit) is not one of this client's groups")
            }
            return [explicit]
        }
        guard !client.accessGroups.isEmpty else {
            throw KeychainError.missingEntitlement("the client has no keychain access groups")
        }
        return client.accessGroups
    }
}
