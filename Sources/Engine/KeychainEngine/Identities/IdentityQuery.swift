import FoundationEssentials
import KeychainCore

/// A `kSecClassIdentity` query, split into the certificate query and the private-key query it joins
/// (`IdentityAttributes` says which half each term constrains). An identity has no item of its own: it
/// is a certificate paired with the private key whose `klbl` is the certificate's `pkhh`. The facade
/// turns a `kSecValueRef` object into plain terms before the query reaches here.
struct IdentityQuery {
    /// Terms on the certificate, with the use options (context, prompt, UI, tombstones).
    private(set) var certificateTerms: [String: ItemValue] = [:]
    /// Terms on the private key, with the same use options.
    private(set) var keyTerms: [String: ItemValue] = [:]
    /// How many identities a search returns (`kSecMatchLimit`; one by default).
    private(set) var limit = 1
    let returnsReference: Bool
    let returnsAttributes: Bool
    /// A term that no identity can meet (a key class other than private, a label that is not the
    /// certificate's key hash): the query finds nothing.
    private(set) var matchesNothing = false

    static func isIdentity(_ dictionary: [String: ItemValue]) -> Bool {
        dictionary["class"] == .string(ItemClass.identityName)
    }

    init(_ dictionary: [String: ItemValue], for operation: ItemOperation) throws {
        // Read as every query's return keys are: a boolean or a number, anything else errSecParam.
        func flag(_ name: String) throws -> Bool {
            try dictionary[name].map { try AttributeCodec.boolean($0, key: name) } ?? false
        }
        returnsReference = try flag("r_Ref")
        returnsAttributes = try flag("r_Attributes")
        switch operation {
        case .copyMatching:
            if try flag("r_Data") || flag("r_PersistentRef") {
                throw KeychainError.unimplemented("an identity's data and persistent reference are not returned yet")
            }
            limit = try Self.limit(dictionary["m_Limit"])
        case .delete:
            if dictionary["u_AuthUI"] == .string("u_AuthUIS") {
                throw KeychainError.invalidParameter(
                    "kSecUseAuthenticationUISkip is allowed only in SecItemCopyMatching")
            }
            if let limit = dictionary["m_Limit"], limit != .string("m_LimitAll") {
                throw KeychainError.invalidParameter("SecItemDelete deletes every match: kSecMatchLimit must be all")
            }
            limit = .max
        case .add, .update:
            throw KeychainError.invalidParameter(
                "an identity is added as a SecIdentity and changed through its certificate or its key")
        }
        for name in dictionary.keys.sorted() {
            guard let value = dictionary[name] else { continue }
            switch name {
            case "class", "r_Data", "r_Attributes", "r_Ref", "r_PersistentRef", "m_Limit":
                continue
            case _ where name.hasPrefix("u_"):
                certificateTerms[name] = value
                keyTerms[name] = value
            case _ where name.hasPrefix("v_"):
                throw KeychainError.invalidParameter("\(name) does not name an identity")
            default:
                switch IdentityAttributes.half(of: name) {
                case .certificate: certificateTerms[name] = value
                case .key: keyTerms[name] = value
                case .both:
                    certificateTerms[name] = value
                    keyTerms[name] = value
                }
            }
        }
        // An identity's key is private, and its klbl is its certificate's pkhh.
        if let keyClass = keyTerms["kcls"], keyClass != .integer(1), keyClass != .string("1") { matchesNothing = true }
        if let label = keyTerms["klbl"] {
            if let hash = certificateTerms["pkhh"], hash != label { matchesNothing = true }
            certificateTerms["pkhh"] = label
        }
    }

    /// The certificates that may be identities, every one of them, with what the join needs: their
    /// attributes, and their data and persistent reference only when identity objects are made.
    func certificateSearch(returning: Bool) -> [String: ItemValue] {
        var terms = certificateTerms
        terms["class"] = .string("cert")
        terms["m_Limit"] = .string("m_LimitAll")
        if returning {
            terms["r_Attributes"] = .bool(true)
            if returnsReference {
                terms["r_Data"] = .bool(true)
                terms["r_PersistentRef"] = .bool(true)
            }
        }
        return terms
    }

    /// The private key of the certificate whose public key hashes to `hash`; with `readingKey`, its
    /// data too (a key guarded by an access control asks then).
    func keySearch(hash: Data, returning: Bool, readingKey: Bool = false) -> [String: ItemValue] {
        var terms = keyTerms
        terms["class"] = .string("keys")
        terms["kcls"] = .integer(1)
        terms["klbl"] = .data(hash)
        if returning {
            terms["r_Attributes"] = .bool(true)
            if readingKey {
                terms["r_PersistentRef"] = .bool(true)
                terms["r_Data"] = .bool(true)
            }
        }
        return terms
    }

    private static func limit(_ value: ItemValue?) throws -> Int {
        switch value {
        case nil, .string("m_LimitOne")?: return 1
        case .string("m_LimitAll")?: return .max
        case .integer(let limit)? where limit > 0: return Int(clamping: limit)
        default:
            throw KeychainError.invalidParameter(
                "m_Limit must be kSecMatchLimitOne, kSecMatchLimitAll or a positive number")
        }
    }
}
