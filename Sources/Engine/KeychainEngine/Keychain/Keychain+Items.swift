import FoundationEssentials
import KeychainBytes
import KeychainCrypto
import KeychainKeybag
import KeychainStorage

/// The four SecItem operations, with Apple's data-protection keychain semantics.
extension Keychain {
    /// `SecItemAdd`. Returns what the query's return keys ask for, or nil.
    public func add(_ dictionary: [String: ItemValue], client: ClientIdentity) throws -> ItemResult? {
        switch try Addition.parse(dictionary) {
        case .enclaveKeyToken(let token, let attributes):
            return try perform { try addEnclaveKeyToken(token, attributes, client: client) }
        case .item(let query):
            return try perform { try self.add(query, client: client) }
        }
    }

    /// `SecItemCopyMatching`.
    public func copyMatching(_ dictionary: [String: ItemValue], client: ClientIdentity) throws
        -> ItemResult?
    {
        if IdentityQuery.isIdentity(dictionary) {
            let identity = try IdentityQuery(dictionary, for: .copyMatching)
            return try perform { try copyIdentities(identity, client: client) }
        }
        let query = try Query.parse(dictionary, for: .copyMatching)
        return try perform { try self.copyMatching(query, client: client) }
    }

    /// `SecItemUpdate`: changes every matching item in one transaction, or none.
    public func update(
        _ dictionary: [String: ItemValue], attributes changes: [String: ItemValue], client: ClientIdentity
    ) throws {
        if IdentityQuery.isIdentity(dictionary) {
            throw KeychainError.unimplemented("identities are updated through their certificate or their key")
        }
        let query = try Query.parse(dictionary, for: .update)
        try perform { try self.update(query, changes: changes, client: client) }
    }

    /// `SecItemDelete`: deletes every matching item.
    public func delete(_ dictionary: [String: ItemValue], client: ClientIdentity) throws {
        if IdentityQuery.isIdentity(dictionary) {
            let identity = try IdentityQuery(dictionary, for: .delete)
            return try perform { try deleteIdentities(identity, client: client) }
        }
        let query = try Query.parse(dictionary, for: .delete)
        try perform { try self.delete(query, client: client) }
    }

    /// Runs an operation after noticing keybag changes made by other processes (checked at most once
    /// a millisecond), translating failures.
    /// A write transaction of items. It is refused inside the transaction once this object is retired:
    /// a write whose keys were taken before a move to another root, committed after the move's own
    /// transaction, would seal an item under class keys that are gone.
    func itemTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        try pool.writeTransaction { connection in
            guard !retired.load(ordering: .acquiring) else { throw Self.retiredError }
            return try body(connection)
        }
    }

    func perform<T>(_ body: () throws -> T) throws -> T {
        if retired.load(ordering: .acquiring) { throw Self.retiredError }
        do {
            try keybag.refreshIfChanged(maximumAge: 0.001)
            return try body()
        } catch {
            let failure = Self.translate(error)
            // A read that met items already moved to another root's keys found them unreadable: not
            // missing, but to be asked again of the directory opened anew.
            if failure.code == .itemNotFound, retired.load(ordering: .acquiring) { throw Self.retiredError }
            throw failure
        }
    }

    static var retiredError: KeychainError {
        .notAvailable("the keychain was erased, or moved to another device root: open it again")
    }

    // MARK: Add

    /// Adds many items in one transaction: all of them, or none if any fails. Used to load items in
    /// bulk (benchmarks, and later restore); each dictionary is a SecItemAdd query.
    public func add(contentsOf dictionaries: [[String: ItemValue]], client: ClientIdentity) throws {
        let queries = try dictionaries.map { try Query.parse($0, for: .add) }
        try perform {
            let rows = try queries.map { try prepareAdd($0, client: client).row }
            try itemTransaction { connection in
                let store = ItemStore(connection: connection)
                for row in rows { try insertNew(row, store: store) }
            }
        }
    }

    private func add(_ query: Query, client: ClientIdentity) throws -> ItemResult? {
        let (row, record) = try prepareAdd(query, client: client)
        try itemTransaction { connection in try insertNew(row, store: ItemStore(connection: connection)) }
        guard query.returnsAnything else { return nil }
        return try ResultShape(query: query).result(for: [record])
    }

    /// Validates an add and seals the new item, ready for insertion.
    ///
    /// - Parameter enclavePublicKey: set only by `generateEnclaveKey`, whose query carries the wrapped
    ///   private key as its data: a token item (`kSecAttrTokenID`) is never added from outside.
    func prepareAdd(_ query: Query, client: ClientIdentity, enclavePublicKey: Data? = nil) throws -> (
        row: StoredItem, record: ItemRecord
    ) {
        guard let itemClass = query.itemClass, !query.isIdentity else {
            throw KeychainError.invalidParameter("identities are added as a certificate and a private key")
        }
        if query.valueReference != nil {
            throw KeychainError.invalidParameter("kSecValueRef items are not supported for class \(itemClass.name)")
        }
        if query.persistentReference != nil {
            throw KeychainError.invalidParameter("kSecValuePersistentRef cannot be added")
        }
        if query.limitGiven {
            throw KeychainError.invalidParameter("kSecMatchLimit is not allowed in SecItemAdd")
        }
        if enclavePublicKey == nil, let token = query.attributes["tkid"], token != .string("") {
            throw KeychainError.invalidParameter(
                "kSecAttrTokenID items are made by their token: an enclave key by SecKeyCreateRandomKey")
        }
        let group = try client.groupForWriting(query.accessGroup)
        if query.synchronizable == .any {
            throw KeychainError.invalidParameter("kSecAttrSynchronizableAny is a search value only")
        }
        let synchronizable = query.synchronizable == .yes
        try query.shared.checkAccessControlForWriting(synchronizable: synchronizable)
        let protection = query.shared.protectionClass ?? (itemClass == .certificate ? .always : .whenUnlocked)
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
        record.enclavePublicKey = enclavePublicKey
        try record.updateDigest()
        let factors = try authentication.factorsForNewItem(record.accessControl, context: query.authenticationContext)
        if factors != nil, record.accessControl?.constraint?.offersBiometryCurrentSet == true {
            record.biometryBinding = try authentication.currentSetBinding()
        }
        return (try ItemSealing.seal(record, classKey: classKey, digests: try digests(), factors: factors), record)
    }

    /// Inserts a new row; a tombstone or an undecryptable row in the same slot gives way, a live
    /// item does not (errSecDuplicateItem).
    func insertNew(_ row: StoredItem, store: ItemStore) throws {
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
        return !ItemDecryption.isIntact(row, protection: protection, classKey: classKey)
    }

    // MARK: Copy matching

    func copyMatching(_ query: Query, client: ClientIdentity) throws -> ItemResult? {
        if query.isIdentity { throw KeychainError.itemNotFound }
        guard let itemClass = query.itemClass else { throw KeychainError.itemNotFound }
        if query.valueReference != nil {
            throw KeychainError.invalidParameter("kSecValueRef is not supported for class \(itemClass.name)")
        }
        let groups = try client.groupsForReading(query.accessGroup)
        // No read transaction: every candidate is re-checked after decryption, so a write landing
        // between two statements cannot make a wrong item match; it can only be seen or not.
        let access = ItemAccess(query: query, broker: authentication, client: client)
        let matches = try pool.withConnection { connection in
            try search(
                query, itemClass: itemClass, groups: groups, store: ItemStore(connection: connection), access: access
            )
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
        let groups = try client.groupsForWriting(query.accessGroup)
        if let newGroup = change.shared.accessGroup {
            guard client.writableGroups.contains(newGroup) else {
                throw KeychainError.missingEntitlement(
                    "the new access group \(newGroup) is not one of this client's groups")
            }
        }
        let digests = try digests()
        // An update decrypts and encrypts: a guarded item's access control is satisfied first, outside
        // the write transaction (a prompt may wait for a person), in the caller's context or one of this
        // call's own; inside it nobody is asked, and what was satisfied counts.
        let context = query.authenticationContext ?? AuthenticationContextReference()
        defer { if query.authenticationContext == nil { authentication.forget(context, client: client) } }
        // Keys first say whether the change fits them (an enclave key's data and key attributes are
        // fixed), from their attributes alone, so that nobody is asked for a change that is refused.
        if itemClass == .key {
            let found = try pool.withConnection { connection in
                try search(query, itemClass: itemClass, groups: groups, store: ItemStore(connection: connection))
                    .run(limit: Int.max, needSecret: false)
            }
            for match in found { try change.checkApplicable(to: match.record) }
        }
        let asking = ItemAccess(query: query, broker: authentication, client: client, context: context)
        _ = try pool.withConnection { connection in
            var search = try search(
                query, itemClass: itemClass, groups: groups, store: ItemStore(connection: connection), access: asking)
            search.enclaveKey = .wrappedPrivateKey
            return try search.run(limit: Int.max, needSecret: true)
        }
        let access = ItemAccess(query: query, broker: authentication, client: client, context: context, asking: false)
        try changingMatches(
            of: query, itemClass: itemClass, groups: groups, needSecret: true, access: access
        ) { store, matches in
            for match in matches {
                var record = match.record
                try change.apply(to: &record, now: clock.now())
                // A new access control is bound to the set enrolled now; an unchanged one keeps its set.
                if record.accessControl != match.record.accessControl {
                    record.biometryBinding =
                        record.accessControl?.constraint?.offersBiometryCurrentSet == true
                        ? try authentication.currentSetBinding() : nil
                }
                let classKey = try keybag.classKey(for: record.protection)
                let factors = try authentication.factorsForNewItem(record.accessControl, context: context)
                var row = try ItemSealing.seal(record, classKey: classKey, digests: digests, factors: factors)
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
        of query: Query, itemClass: ItemClass, groups: [String], needSecret: Bool, access: ItemAccess? = nil,
        _ body: (ItemStore, [Match]) throws -> Void
    ) throws {
        try itemTransaction { connection in
            let store = ItemStore(connection: connection)
            // The secrets found here are re-sealed or dropped, never returned: an enclave key's is its
            // wrapped private key, kept as it is.
            var search = try search(query, itemClass: itemClass, groups: groups, store: store, access: access)
            search.enclaveKey = .wrappedPrivateKey
            let matches = try search.run(limit: Int.max, needSecret: needSecret)
            guard !matches.isEmpty else { throw KeychainError.itemNotFound }
            try body(store, matches)
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
        let groups = try client.groupsForWriting(query.accessGroup)
        let digests = try digests()
        try changingMatches(of: query, itemClass: itemClass, groups: groups, needSecret: false) { store, matches in
            for match in matches {
                try store.delete(rowID: match.row.rowID)
                if query.useTombstones ?? match.record.synchronizable {
                    try insertTombstone(for: match.record, store: store, digests: digests, keepingIdentity: true)
                }
            }
        }
    }

    // MARK: Helpers

    func search(
        _ query: Query, itemClass: ItemClass, groups: [String], store: ItemStore, access: ItemAccess? = nil
    ) throws -> ItemSearch {
        ItemSearch(
            store: store, keybag: keybag, digests: try digests(), itemClass: itemClass, query: query, groups: groups,
            access: access)
    }
}
