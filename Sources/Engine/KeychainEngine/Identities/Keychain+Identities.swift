import FoundationEssentials
import KeychainCore
import KeychainCrypto
import KeychainStorage

/// Identities: certificates joined to their private keys (`IdentityQuery`), each operation one
/// request, so that through the daemon an identity is found, added and deleted whole.
extension Keychain {
    /// `SecItemAdd` of a `SecIdentity`: its certificate's item and its private key's (nil when the key
    /// is already stored, as a stored enclave key is), added in one transaction: both, or neither. A
    /// key already in the keychain is joined, not duplicated; a certificate already there is
    /// errSecDuplicateItem, as Apple's identity uniqueness is its certificate's.
    public func addIdentity(
        certificate: [String: ItemValue], key: [String: ItemValue]?, client: ClientIdentity
    ) throws {
        try perform {
            let certificateQuery = try Query.parse(certificate, for: .add)
            guard certificateQuery.itemClass == .certificate else {
                throw KeychainError.invalidParameter("an identity's certificate is a kSecClassCertificate item")
            }
            let certificateRow = try prepareAdd(certificateQuery, client: client).row
            var keyRow: StoredItem?
            if let key {
                switch try Addition.parse(key) {
                case .item(let keyQuery):
                    // The two halves make an identity: a private key whose label is the certificate's
                    // key hash (what the join pairs them by).
                    guard keyQuery.itemClass == .key,
                        keyQuery.attributes["kcls"] == .integer(1) || keyQuery.attributes["kcls"] == .string("1"),
                        let hash = certificateQuery.attributes["pkhh"], keyQuery.attributes["klbl"] == hash
                    else {
                        throw KeychainError.invalidParameter(
                            "an identity's key is the private kSecClassKey item whose label is its certificate's key hash"
                        )
                    }
                    keyRow = try prepareAdd(keyQuery, client: client).row
                case .enclaveKeyToken(let token, let attributes):
                    keyRow = try prepareEnclaveKeyToken(token, attributes, client: client).row
                }
            }
            try itemTransaction { connection in
                let store = ItemStore(connection: connection)
                try insertNew(certificateRow, store: store)
                guard let keyRow else { return }
                do {
                    try insertNew(keyRow, store: store)
                } catch let error as KeychainError where error.code == .duplicateItem {
                    // The key was already there (an identity made from a stored key): the certificate
                    // joins it.
                }
            }
        }
    }

    /// `SecItemCopyMatching` of identities: up to the query's limit of certificate–key pairs, each
    /// answered as `.array([certificate, key])` (the certificate's attributes, data and persistent
    /// reference; the key's attributes and persistent reference, and its data when a reference to the
    /// identity is asked for), all of them in an `.array`. A certificate without a private key is no
    /// identity; with the key's data asked for, neither is a pair whose certificate or key does not load.
    func copyIdentities(_ identity: IdentityQuery, client: ClientIdentity) throws -> ItemResult? {
        guard !identity.matchesNothing else { throw KeychainError.itemNotFound }
        let readingKeys = identity.returnsReference
        let certificateQuery = try Query.parse(identity.certificateSearch(returning: true), for: .copyMatching)
        guard case .array(let certificates)? = try copyMatching(certificateQuery, client: client) else {
            throw KeychainError.itemNotFound
        }
        var pairs: [ItemResult] = []
        for case .dictionary(let certificate) in certificates where pairs.count < identity.limit {
            guard case .data(let hash)? = certificate["pkhh"] else { continue }
            let key: [String: ItemValue]
            do {
                let query = try Query.parse(
                    identity.keySearch(hash: hash, returning: true, readingKey: readingKeys), for: .copyMatching)
                guard case .dictionary(let found)? = try copyMatching(query, client: client) else { continue }
                key = found
            } catch let error as KeychainError where error.code == .itemNotFound {
                continue
            }
            if readingKeys, !Self.loads(certificate: certificate, key: key) { continue }
            pairs.append(.array([.dictionary(certificate), .dictionary(key)]))
        }
        guard !pairs.isEmpty else { throw KeychainError.itemNotFound }
        guard identity.returnsReference || identity.returnsAttributes else { return nil }
        return .array(pairs)
    }

    /// `SecItemDelete` of identities, in one transaction: each identity's certificate, and its private
    /// key unless another certificate still names that key (as Apple does). A half this client may
    /// read but not write stays, and so does its identity. Nobody is asked (deleting never is).
    func deleteIdentities(_ identity: IdentityQuery, client: ClientIdentity) throws {
        guard !identity.matchesNothing else { throw KeychainError.itemNotFound }
        let certificateQuery = try Query.parse(identity.certificateSearch(returning: false), for: .delete)
        let readable = try client.groupsForReading(certificateQuery.accessGroup)
        let writable = Set(client.writableGroups)
        let digests = try digests()
        try itemTransaction { connection in
            let store = ItemStore(connection: connection)
            let certificates = try search(certificateQuery, itemClass: .certificate, groups: readable, store: store)
                .run(limit: .max, needSecret: false)
            var deletedAny = false
            var deletedKeys: Set<Int64> = []
            for certificate in certificates {
                guard case .data(let hash)? = certificate.record.attributes["pkhh"] else { continue }
                let keyQuery = try Query.parse(identity.keySearch(hash: hash, returning: false), for: .delete)
                let keyGroups = try client.groupsForReading(keyQuery.accessGroup)
                guard
                    let key = try search(keyQuery, itemClass: .key, groups: keyGroups, store: store)
                        .run(limit: 1, needSecret: false).first,
                    writable.contains(certificate.record.accessGroup)
                else { continue }
                try remove(certificate, tombstones: certificateQuery.useTombstones, store: store, digests: digests)
                deletedAny = true
                guard !deletedKeys.contains(key.row.rowID), writable.contains(key.record.accessGroup),
                    try !certificateRemains(for: hash, client: client, store: store)
                else { continue }
                try remove(key, tombstones: keyQuery.useTombstones, store: store, digests: digests)
                deletedKeys.insert(key.row.rowID)
            }
            guard deletedAny else { throw KeychainError.itemNotFound }
        }
    }

    /// Whether a certificate of any kind (synchronizable or not) that this client sees still names the
    /// key with this hash.
    private func certificateRemains(for hash: Data, client: ClientIdentity, store: ItemStore) throws -> Bool {
        let query = try Query.parse(
            ["class": .string("cert"), "pkhh": .data(hash), "sync": .string("syna")], for: .copyMatching)
        return try !search(query, itemClass: .certificate, groups: client.groupsForReading(nil), store: store)
            .run(limit: 1, needSecret: false).isEmpty
    }

    /// Deletes a found item, leaving a tombstone where the query or its being synchronizable asks.
    private func remove(_ match: Match, tombstones: Bool?, store: ItemStore, digests: ItemDigests) throws {
        try store.delete(rowID: match.row.rowID)
        if tombstones ?? match.record.synchronizable {
            try insertTombstone(for: match.record, store: store, digests: digests)
        }
    }

    /// Whether the pair makes an identity object: the certificate's data is a certificate, and the key's
    /// data a key of its type (an enclave key's data is its public key).
    private static func loads(certificate: [String: ItemValue], key: [String: ItemValue]) -> Bool {
        guard let der = certificate["v_Data"]?.bytes, X509Certificate(der: der) != nil else { return false }
        let kind: AsymmetricKey.KindHint
        switch key["type"] {
        case .integer(42)?, .string("42")?: kind = .rsa
        case .integer(73)?, .string("73")?: kind = .ec
        default: return false
        }
        let enclave = key["tkid"] == .string(enclaveTokenID)
        let loaded = key["v_Data"]?.withBorrowedBytes { bytes in
            (try? AsymmetricKey.importing(bytes, kind: enclave ? .ec : kind, isPrivate: !enclave)) != nil
        }
        return loaded == true
    }
}
