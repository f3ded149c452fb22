import FoundationEssentials
import KeychainBytes

/// Shapes found items into what SecItemCopyMatching (and SecItemAdd's result) returns on iOS:
/// one kind requested gives that value alone (data, attributes, persistent reference); several give a
/// dictionary of attributes plus `v_Data` / `v_PersistentRef`; a match limit other than one gives an
/// array. Password items have no object reference, so `kSecReturnRef` alone yields nothing.
struct ResultShape {
    let query: Query

    func result(for records: [ItemRecord]) throws -> ItemResult? {
        let single = try records.compactMap { try shape($0) }
        if query.limit.returnsArray { return .array(single) }
        return single.first
    }

    private func shape(_ record: ItemRecord) throws -> ItemResult? {
        let kinds = [query.returnData, query.returnAttributes, query.returnReference, query.returnPersistentReference]
            .filter { $0 }.count
        var reference: Data { PersistentReference(itemClass: record.itemClass, identity: record.persistentID).bytes }
        if kinds == 1 {
            if query.returnData { return .secret(record.secret ?? SecureBytes(copying: [])) }
            if query.returnPersistentReference { return .data(reference) }
            if query.returnAttributes { return .dictionary(try record.publicAttributes()) }
            return nil  // a reference alone: no Sec object for this class
        }
        var dictionary: [String: ItemValue] = query.returnAttributes ? try record.publicAttributes() : [:]
        // An item stored without data has no `v_Data` key beside its attributes (as on iOS); asked for
        // data alone, it gives empty data.
        if query.returnData, let secret = record.secret { dictionary["v_Data"] = .secret(secret) }
        if query.returnPersistentReference { dictionary["v_PersistentRef"] = .data(reference) }
        if query.returnReference { dictionary["class"] = .string(record.itemClass.name) }
        return .dictionary(dictionary)
    }
}
