import Foundation
import KeychainCore
import KeychainEngine

/// Identities in the keychain. An identity has no item of its own: a `kSecClassIdentity` query is a
/// certificate query joined to private keys, each certificate paired with the private key whose `klbl`
/// is the certificate's `pkhh`; `IdentityAttributes` says which half each term constrains. Adding an
/// identity adds its certificate and its key; deleting one deletes both (the key only when no other
/// certificate names it).
enum IdentityItems {
    /// Whether the query is about identities: `kSecClassIdentity`, or a `SecIdentity` as `kSecValueRef`.
    static func isIdentityQuery(_ query: [String: ItemValue]) -> Bool {
        if query["class"] == .string("idnt") { return true }
        if case .valueReference(let reference)? = query["v_Ref"], reference.kind == .identity { return true }
        return false
    }

    /// One identity the keychain holds: the certificate item and the key item that make it, and the
    /// identity object when it was asked for.
    private struct Pair {
        let certificate: [String: ItemValue]
        let key: [String: ItemValue]
        let identity: SecIdentity?
    }

    /// The identities the query finds, in the shape it asks for (`kSecReturnRef`: identities;
    /// `kSecReturnAttributes`: the certificate's attributes, with `v_Ref` when both are asked).
    static func copyMatching(
        _ query: [String: ItemValue], reference: SecObject?, service: any KeychainService
    ) throws -> AnyObject? {
        let wantRef = query["r_Ref"] == .bool(true)
        let wantAttributes = query["r_Attributes"] == .bool(true)
        if query["r_Data"] == .bool(true) || query["r_PersistentRef"] == .bool(true) {
            throw KeychainError.unimplemented("an identity's data and persistent reference are not returned yet")
        }
        let limit = try limit(of: query)
        // The key's data is read only when an identity object is asked for (a guarded key asks then).
        let pairs = try find(query, reference: reference, readingKeys: wantRef, limit: limit, service: service)
        guard !pairs.isEmpty else { throw KeychainError.itemNotFound }
        guard wantRef || wantAttributes else { return nil }
        func shape(_ pair: Pair) -> AnyObject {
            if !wantAttributes, let identity = pair.identity { return identity }
            var attributes = pair.certificate
            attributes["v_Data"] = nil
            attributes["v_PersistentRef"] = nil
            let dictionary = KeyItems.resultDictionary(attributes, reference: pair.identity)
            dictionary["class"] = "idnt" as NSString
            return dictionary
        }
        return limit == 1 ? shape(pairs[0]) : pairs.map(shape) as NSArray
    }

    /// Deletes every identity the query finds: its certificate, then its private key unless another
    /// certificate still names that key (as Apple does). Nobody is asked (deleting never is).
    static func delete(_ query: [String: ItemValue], reference: SecObject?, service: any KeychainService) throws {
        if query["u_AuthUI"] == .string("u_AuthUIS") {
            throw KeychainError.invalidParameter("kSecUseAuthenticationUISkip is allowed only in SecItemCopyMatching")
        }
        if let limit = query["m_Limit"], limit != .string("m_LimitAll") {
            throw KeychainError.invalidParameter("SecItemDelete deletes every match: kSecMatchLimit must be all")
        }
        let pairs = try find(query, reference: reference, readingKeys: false, limit: .max, service: service)
        var deletedAny = false
        var deletedKeys: Set<Data> = []
        for pair in pairs {
            guard case .data(let certificateReference)? = pair.certificate["v_PersistentRef"],
                case .data(let keyReference)? = pair.key["v_PersistentRef"],
                case .data(let hash)? = pair.certificate["pkhh"]
            else { throw KeychainError.internalError("an identity's item came back without its reference") }
            var certificate: [String: ItemValue] = [
                "class": .string("cert"), "v_PersistentRef": .data(certificateReference),
            ]
            certificate["u_Tomb"] = query["u_Tomb"]
            do {
                try service.delete(certificate)
            } catch let error as KeychainError where error.code == .itemNotFound {
                // Readable but not writable here (a token's group): the identity stays, key and all.
                continue
            }
            deletedAny = true
            guard !deletedKeys.contains(keyReference), try !certificateRemains(for: hash, service: service) else {
                continue
            }
            var key: [String: ItemValue] = ["class": .string("keys"), "v_PersistentRef": .data(keyReference)]
            key["u_Tomb"] = query["u_Tomb"]
            do {
                try service.delete(key)
                deletedKeys.insert(keyReference)
            } catch let error as KeychainError where error.code == .itemNotFound {
                // Not writable here: the certificate went, the key stays where it is.
            }
        }
        guard deletedAny else { throw KeychainError.itemNotFound }
    }

    /// Whether a certificate of any kind (synchronizable or not) still names the key with this hash.
    private static func certificateRemains(for hash: Data, service: any KeychainService) throws -> Bool {
        do {
            _ = try service.copyMatching(["class": .string("cert"), "pkhh": .data(hash), "sync": .string("syna")])
            return true
        } catch let error as KeychainError where error.code == .itemNotFound {
            return false
        }
    }

    /// An add of an identity: its certificate, then its private key.
    static func add(_ identity: SecIdentity, query: [String: ItemValue], service: any KeychainService) throws {
        var certificate = query
        certificate["class"] = nil
        certificate["v_Ref"] = nil
        var certificateItem = try KeyItems.addition(of: identity.certificate, to: certificate)
        // A stored enclave key exists only as its item: the certificate joins it.
        let stored = identity.privateKey.enclave.map { $0.token == nil } ?? false
        let keyItem = stored ? nil : try KeyItems.addition(of: identity.privateKey, to: certificate)
        certificateItem["r_PersistentRef"] = .bool(true)
        let added = try service.add(certificateItem)
        do {
            if let keyItem { _ = try service.add(keyItem) }
        } catch let error as KeychainError where error.code == .duplicateItem {
            // The key was already there (an identity made from a stored key): the certificate joins it.
        } catch {
            // No half-added identity: the certificate just added goes again (by its own reference, so a
            // copy of it elsewhere is left alone), and the key's failure is the answer.
            var reference: ItemValue?
            switch added {
            case .data(let data)?: reference = .data(data)
            case .dictionary(let values)?: reference = values["v_PersistentRef"]
            default: reference = nil
            }
            if let reference { try? service.delete(["class": .string("cert"), "v_PersistentRef": reference]) }
            throw error
        }
    }

    /// The certificate–key pairs the query names, at most `limit` of them. Certificates without a
    /// private key are no identity; with `readingKeys`, neither is a pair whose key does not load.
    private static func find(
        _ query: [String: ItemValue], reference: SecObject?, readingKeys: Bool, limit: Int,
        service: any KeychainService
    ) throws -> [Pair] {
        var certificateTerms: [String: ItemValue] = [:]
        var keyTerms: [String: ItemValue] = [:]
        for (name, value) in query {
            switch name {
            case "class", "v_Ref", "r_Data", "r_Attributes", "r_Ref", "r_PersistentRef", "m_Limit":
                continue
            case _ where name.hasPrefix("u_"):
                // Use options (context, prompt, UI skip, tombstones) hold for both halves.
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
        if query["v_Ref"] != nil {
            // An identity or certificate names the certificate; a key names the key.
            switch reference {
            case let identity as SecIdentity:
                for (name, value) in try KeyItems.matchingTerms(of: identity.certificate) {
                    certificateTerms[name] = value
                }
            case let certificate as SecCertificate:
                for (name, value) in try KeyItems.matchingTerms(of: certificate) { certificateTerms[name] = value }
            case let key as SecKey:
                let own = try KeyItems.attributes(of: key)
                for name in ["kcls", "klbl", "type", "bsiz", "esiz"] { keyTerms[name] = own[name] }
            default:
                throw KeychainError.invalidParameter("kSecValueRef of an identity query is no SecIdentity")
            }
        }
        // An identity's key is private, and its klbl is its certificate's pkhh.
        if let keyClass = keyTerms["kcls"], keyClass != .integer(1), keyClass != .string("1") { return [] }
        if let label = keyTerms["klbl"] {
            if let hash = certificateTerms["pkhh"], hash != label { return [] }
            certificateTerms["pkhh"] = label
        }
        certificateTerms["class"] = .string("cert")
        certificateTerms["r_Data"] = .bool(true)
        certificateTerms["r_Attributes"] = .bool(true)
        certificateTerms["r_PersistentRef"] = .bool(true)
        certificateTerms["m_Limit"] = .string("m_LimitAll")
        let certificates: [ItemResult]
        do {
            guard case .array(let found)? = try service.copyMatching(certificateTerms) else { return [] }
            certificates = found
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
        var pairs: [Pair] = []
        for result in certificates where pairs.count < limit {
            guard case .dictionary(let certificate) = result, case .data(let hash)? = certificate["pkhh"] else {
                continue
            }
            var terms = keyTerms
            terms["class"] = .string("keys")
            terms["kcls"] = .integer(1)
            terms["klbl"] = .data(hash)
            terms["r_Attributes"] = .bool(true)
            terms["r_PersistentRef"] = .bool(true)
            if readingKeys { terms["r_Data"] = .bool(true) }
            let key: [String: ItemValue]
            do {
                guard case .dictionary(let found)? = try service.copyMatching(terms) else { continue }
                key = found
            } catch let error as KeychainError where error.code == .itemNotFound {
                continue
            }
            var identity: SecIdentity?
            if readingKeys {
                guard let der = certificate["v_Data"]?.bytes,
                    let object = SecCertificateCreateWithData(nil, der as CFData),
                    let material = key["v_Data"],
                    let privateKey = try? KeyItems.makeKey(material, attributes: key, options: query)
                else { continue }
                identity = SecIdentity(certificate: object, privateKey: privateKey)
            }
            pairs.append(Pair(certificate: certificate, key: key, identity: identity))
        }
        return pairs
    }

    /// How many identities the query asks for (`kSecMatchLimit`; one by default).
    private static func limit(of query: [String: ItemValue]) throws -> Int {
        switch query["m_Limit"] {
        case nil, .string("m_LimitOne")?: return 1
        case .string("m_LimitAll")?: return .max
        case .integer(let limit)? where limit > 0: return Int(clamping: limit)
        default:
            throw KeychainError.invalidParameter(
                "m_Limit must be kSecMatchLimitOne, kSecMatchLimitAll or a positive number")
        }
    }
}
