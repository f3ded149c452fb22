import FoundationEssentials
import KeychainCore

/// What a `SecItemAdd` dictionary asks for, decided by the parser rather than by its callers: a new
/// item, or the storing of an ephemeral enclave key that the dictionary carries as its token (`toid`,
/// which `SecItemAdd` of a `SecKey` made with `kSecAttrIsPermanent` false puts there).
enum Addition {
    /// An item, its query parsed.
    case item(Query)
    /// An ephemeral enclave key's token, and the attributes to store it with (the token taken out).
    case enclaveKeyToken(Data, attributes: [String: ItemValue])

    static func parse(_ dictionary: [String: ItemValue]) throws -> Addition {
        if case .data(let token)? = dictionary["toid"] {
            var attributes = dictionary
            attributes["toid"] = nil
            return .enclaveKeyToken(token, attributes: attributes)
        }
        return .item(try Query.parse(dictionary, for: .add))
    }
}
