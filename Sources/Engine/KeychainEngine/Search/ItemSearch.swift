import FoundationEssentials
import KeychainBytes
import KeychainCrypto
import KeychainKeybag
import KeychainStorage

/// A found item: its row and its decrypted contents.
struct Match {
    var row: StoredItem
    var record: ItemRecord
}

/// Finds the items a query matches, through the digest indexes only, then decrypts and re-checks each.
///
/// Plan, cheapest first: a persistent reference names one row; a query fixing the whole class primary
/// key names one lookup digest per access group; otherwise the rarest attribute's index entries drive
/// and the other attributes are checked against the index; a query with no attributes walks its class.
///
/// Each candidate is decrypted and its attributes compared with the query again, so a row whose
/// digests were swapped or forged is never returned for the wrong query. As on iOS, a candidate whose
/// class key is locked stops the search with errSecInteractionNotAllowed rather than being skipped.
struct ItemSearch {
    let store: ItemStore
    let keybag: Keybag
    let digests: ItemDigests
    let itemClass: ItemClass
    let query: Query
    /// Access groups the caller may see in this operation (already narrowed to an explicit group).
    let groups: [String]
    /// Who answers for items whose access control guards their secret, when secrets are read.
    var access: ItemAccess?
    /// What an enclave key's secret is when secrets are read: its public key for every read, its
    /// wrapped private key only to use or re-seal it.
    var enclaveKey: EnclaveKeyPart = .publicKey

    /// - Parameter needAttributes: false when the caller uses only the secret and the row's identity;
    ///   a lookup by exact primary key then opens the secret blob alone (see `openSecretOnly`).
    func run(limit: Int, needSecret: Bool, needAttributes: Bool = true) throws -> [Match] {
        // Keys never take the secret-only path: it skips the attributes, which tell an enclave key's
        // wrapped private key (never handed out) from a key's data.
        let secretOnly = needSecret && !needAttributes && isExactPrimaryKeyLookup && itemClass != .key
        if let musr = query.musr, musr != .data(Data()) { return [] }
        let groupDigests = try digests.accessGroups(groups)
        var matches: [Match] = []
        let found = try candidates(withMetadata: !secretOnly)
        var position = 0
        while matches.count < limit, position < found.count {
            defer { position += 1 }
            var row: StoredItem
            switch found {
            case .rows(let rows): row = rows[position]
            case .rowIDs(let rowIDs):
                guard let fetched = try store.item(rowID: rowIDs[position]) else { continue }
                row = fetched
            }
            guard columnsMatch(row, groupDigests: groupDigests) else { continue }
            if secretOnly {
                if !ItemCrypto.isGuarded(row.secret) {
                    guard let record = try decrypt(row, secretOnly: true) else { continue }
                    matches.append(Match(row: row, record: record))
                    continue
                }
                // A guarded secret is never read on the fast path: its access control is in the
                // attributes, which the fast path did not fetch.
                guard let whole = try store.item(rowID: row.rowID) else { continue }
                row = whole
            }
            guard let record = try decrypt(row, needSecret: needSecret) else { continue }
            guard recordMatches(record, row: row) else {
                KeychainLog.error("an item's index entries do not match its contents; skipping it as tampered")
                continue
            }
            matches.append(Match(row: row, record: record))
        }
        return matches
    }

    // MARK: Candidates

    /// Candidate rows in rowid order: whole rows when the plan read them anyway, else row ids.
    private enum Candidates {
        case rows([StoredItem])
        case rowIDs([Int64])

        var count: Int {
            switch self {
            case .rows(let rows): rows.count
            case .rowIDs(let rowIDs): rowIDs.count
            }
        }
    }

    private func candidates(withMetadata: Bool) throws -> Candidates {
        if let reference = query.persistentReference {
            guard reference.itemClass == itemClass, let row = try store.item(persistentID: reference.identity) else {
                return .rows([])
            }
            return .rows([row])
        }
        let primaryKey = AttributeSchema.primaryKey(itemClass)
        if primaryKey.allSatisfy({ query.attributes[$0] != nil }) {
            var rows: [StoredItem] = []
            for group in groups {
                for synchronizable in synchronizableValues {
                    let digest = try digests.lookup(
                        itemClass: itemClass, attributes: query.attributes, accessGroup: group,
                        synchronizable: synchronizable)
                    rows.append(contentsOf: try store.items(lookupDigest: digest, withMetadata: withMetadata))
                }
            }
            if rows.count > 1 { rows.sort { $0.rowID < $1.rowID } }
            // Only the primary key asked for (the common lookup): nothing else to check in the index.
            guard query.attributes.count > primaryKey.count else { return .rows(rows) }
            let remaining = try indexTerms(excluding: Set(primaryKey))
            guard !remaining.isEmpty else { return .rows(rows) }
            return .rows(try rows.filter { try carriesAll(remaining, rowID: $0.rowID) })
        }
        let terms = try indexTerms(excluding: [])
        guard !terms.isEmpty else {
            return .rowIDs(try store.rowIDs(itemClass: itemClass.rawValue, tombstone: query.tombstone ?? false))
        }
        // Drive with the rarest term: probe each posting list up to a bound, pick the shortest.
        let probeBound = 1_000
        var best = terms[0]
        var bestCount = Int.max
        if terms.count > 1 {
            for term in terms {
                let count = try store.rowIDs(indexDigest: term.digest, limit: probeBound + 1).count
                if count == 0 { return .rowIDs([]) }
                if count < bestCount {
                    best = term
                    bestCount = count
                }
            }
        }
        let remaining = terms.filter { $0.name != best.name }
        let driving = try store.rowIDs(indexDigest: best.digest)
        guard !remaining.isEmpty else { return .rowIDs(driving) }
        return .rowIDs(try driving.filter { try carriesAll(remaining, rowID: $0) })
    }

    private struct Term {
        let name: String
        let digest: Data
    }

    /// Index digests of the query's attributes, except those the plan already used.
    private func indexTerms(excluding used: Set<String>) throws -> [Term] {
        try query.attributes.keys.sorted().flatMap { name -> [Term] in
            guard !used.contains(name), let descriptor = AttributeSchema.descriptor(name, in: itemClass),
                let value = query.attributes[name]
            else { return [] }
            return try digests.attributeEntries(name, value, kind: descriptor.kind, itemClass: itemClass).map {
                Term(name: $0.term, digest: $0.digest)
            }
        }
    }

    private func carriesAll(_ terms: [Term], rowID: Int64) throws -> Bool {
        try terms.allSatisfy { try store.hasIndexEntry($0.digest, rowID: rowID) }
    }

    private var synchronizableValues: [Bool] { (query.synchronizable ?? .no).values }

    // MARK: Checks

    private func columnsMatch(_ row: StoredItem, groupDigests: Set<Data>) -> Bool {
        guard row.itemClass == itemClass.rawValue, groupDigests.contains(row.accessGroupDigest) else { return false }
        guard row.tombstone == (query.tombstone ?? false) else { return false }
        if query.persistentReference == nil, !synchronizableValues.contains(row.synchronizable) { return false }
        if let protection = query.protection, row.protectionClass != protection.rawValue { return false }
        return true
    }

    /// The query names exactly the class primary key (nothing else the index would have to confirm), so
    /// the lookup digest alone decides which rows match.
    private var isExactPrimaryKeyLookup: Bool {
        guard query.persistentReference == nil, query.musr == nil else { return false }
        let primaryKey = AttributeSchema.primaryKey(itemClass)
        return query.attributes.count == primaryKey.count && primaryKey.allSatisfy { query.attributes[$0] != nil }
    }

    private func decrypt(_ row: StoredItem, needSecret: Bool = false, secretOnly: Bool = false) throws -> ItemRecord? {
        guard let protection = ProtectionClass(rawValue: row.protectionClass) else {
            KeychainLog.error("an item names an unknown protection class; skipping it as corrupt")
            return nil
        }
        let classKey: SecureBytes
        do {
            classKey = try keybag.classKey(for: protection)
        } catch KeybagError.classUnavailable {
            // Its class key was destroyed (passcode removed): the item can never be read again.
            return nil
        }
        if secretOnly { return ItemDecryption.openSecretOnly(row, protection: protection, classKey: classKey) }
        guard needSecret, ItemCrypto.isGuarded(row.secret) else {
            return ItemDecryption.open(
                row, protection: protection, classKey: classKey, needSecret: needSecret, enclaveKey: enclaveKey)
        }
        guard var record = ItemDecryption.open(row, protection: protection, classKey: classKey, needSecret: false)
        else { return nil }
        // An enclave key's access control guards its use, not reading its public key.
        if let publicKey = record.enclavePublicKey, enclaveKey == .publicKey {
            record.secret = SecureBytes(copying: publicKey)
            return record
        }
        guard let accessControl = record.accessControl, accessControl.guardsSecret else {
            KeychainLog.error("an item's secret is guarded but its attributes name no access control; skipping it")
            return nil
        }
        guard let access else {
            throw KeychainError.internalError("a guarded secret was asked for with nobody to authorize it")
        }
        return try access.open(row, record: &record, accessControl: accessControl, classKey: classKey)
            ? record : nil
    }

    /// The decrypted contents must agree with the row's clear columns and with every query term. This is
    /// what keeps a row whose digests were swapped or forged from answering a query that is not its own:
    /// its contents (sealed and bound to the row) would not equal the query's values.
    private func recordMatches(_ record: ItemRecord, row: StoredItem) -> Bool {
        guard groups.contains(record.accessGroup), record.synchronizable == row.synchronizable,
            record.tombstone == row.tombstone
        else { return false }
        if let accessGroup = query.accessGroup, record.accessGroup != accessGroup { return false }
        for (name, wanted) in query.attributes {
            guard let descriptor = AttributeSchema.descriptor(name, in: itemClass),
                let stored = record.attributes[name],
                AttributeCodec.matches(stored, wanted, kind: descriptor.kind)
            else { return false }
        }
        return true
    }
}
