import Foundation
import KeychainCore
import KeychainEngine

/// Identities in the keychain, as the SecItem API sees them. The keychain service joins, adds and
/// deletes identities itself, each in one request (`kSecClassIdentity` queries, `addIdentity`); here
/// a `SecIdentity`, `SecCertificate` or `SecKey` given as `kSecValueRef` becomes the terms that name
/// it, and the pairs the service finds become `SecIdentity` objects or attribute dictionaries.
enum IdentityItems {
    /// Whether the query is about identities: `kSecClassIdentity`, or a `SecIdentity` as `kSecValueRef`.
    static func isIdentityQuery(_ query: [String: ItemValue]) -> Bool {
        if query["class"] == .string("idnt") { return true }
        if case .valueReference(let reference)? = query["v_Ref"], reference.kind == .identity { return true }
        return false
    }

    /// The identities the query finds, in the shape it asks for (`kSecReturnRef`: identities;
    /// `kSecReturnAttributes`: the certificate's attributes, with `v_Ref` when both are asked).
    static func copyMatching(
        _ query: [String: ItemValue], reference: SecObject?, service: any KeychainService
    ) throws -> AnyObject? {
        let wantRef = query["r_Ref"] == .bool(true)
        let wantAttributes = query["r_Attributes"] == .bool(true)
        guard let answer = try service.copyMatching(try terms(query, reference: reference)) else { return nil }
        guard case .array(let pairs) = answer else {
            throw KeychainError.internalError("the keychain answered an identity search with something else")
        }
        // A pair that does not make an identity object is left out, as one bad item in a shared group
        // must not hide every other.
        let shaped = pairs.compactMap { pair -> AnyObject? in
            guard case .array(let halves) = pair, halves.count == 2, case .dictionary(let certificate) = halves[0],
                case .dictionary(let key) = halves[1]
            else { return nil }
            let identity = wantRef ? try? makeIdentity(certificate: certificate, key: key, options: query) : nil
            if wantRef, identity == nil { return nil }
            if !wantAttributes, let identity { return identity }
            var attributes = certificate
            attributes["v_Data"] = nil
            attributes["v_PersistentRef"] = nil
            let dictionary = KeyItems.resultDictionary(attributes, reference: identity)
            dictionary["class"] = "idnt" as NSString
            return dictionary
        }
        guard let first = shaped.first else { throw KeychainError.itemNotFound }
        return limitIsOne(query) ? first : shaped as NSArray
    }

    /// Deletes every identity the query finds (the service deletes each one's certificate and, unless
    /// another certificate names it, its key, in one transaction).
    static func delete(_ query: [String: ItemValue], reference: SecObject?, service: any KeychainService) throws {
        try service.delete(try terms(query, reference: reference))
    }

    /// An add of an identity: its certificate's item and its private key's, in one request.
    static func add(_ identity: SecIdentity, query: [String: ItemValue], service: any KeychainService) throws {
        var certificate = query
        certificate["class"] = nil
        certificate["v_Ref"] = nil
        let certificateItem = try KeyItems.addition(of: identity.certificate, to: certificate)
        // A stored enclave key exists only as its item: the certificate joins it.
        let stored = identity.privateKey.enclave.map { $0.token == nil } ?? false
        let keyItem = stored ? nil : try KeyItems.addition(of: identity.privateKey, to: certificate)
        try service.addIdentity(certificate: certificateItem, key: keyItem)
    }

    /// The service's `kSecClassIdentity` query: an object given as `kSecValueRef` becomes the terms
    /// that name it (an identity or a certificate names the certificate, a key names the key).
    private static func terms(_ query: [String: ItemValue], reference: SecObject?) throws -> [String: ItemValue] {
        var terms = query
        terms["class"] = .string("idnt")
        guard query["v_Ref"] != nil else { return terms }
        terms["v_Ref"] = nil
        let named: [String: ItemValue]
        switch reference {
        case let identity as SecIdentity: named = try KeyItems.matchingTerms(of: identity.certificate)
        case let certificate as SecCertificate: named = try KeyItems.matchingTerms(of: certificate)
        case let key as SecKey:
            let own = try KeyItems.attributes(of: key)
            named = own.filter { ["kcls", "klbl", "type", "bsiz", "esiz"].contains($0.key) }
        default:
            throw KeychainError.invalidParameter("kSecValueRef of an identity query is no SecIdentity")
        }
        for (name, value) in named where name != "class" { terms[name] = value }
        return terms
    }

    private static func makeIdentity(
        certificate: [String: ItemValue], key: [String: ItemValue], options: [String: ItemValue]
    ) throws -> SecIdentity {
        guard let der = certificate["v_Data"]?.bytes,
            let object = SecCertificateCreateWithData(nil, der as CFData),
            let material = key["v_Data"]
        else { throw KeychainError.internalError("an identity came back without its certificate or key data") }
        return SecIdentity(
            certificate: object, privateKey: try KeyItems.makeKey(material, attributes: key, options: options))
    }

    private static func limitIsOne(_ query: [String: ItemValue]) -> Bool {
        switch query["m_Limit"] {
        case nil, .string("m_LimitOne")?, .integer(1)?: true
        default: false
        }
    }
}
