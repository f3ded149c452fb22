import Foundation
import KeychainCore
import KeychainCrypto
import KeychainEngine

/// Identities in the keychain. An identity has no item of its own: a `kSecClassIdentity` query is a
/// certificate query joined to private keys, each certificate paired with the private key whose `klbl`
/// is the certificate's `pkhh`. Terms naming key attributes (`atag`, `kcls`, usage flags) constrain
/// the key, every other term the certificate. Adding an identity adds its certificate and its key;
/// deleting one deletes both.
enum IdentityItems {
    /// Whether the query is about identities: `kSecClassIdentity`, or a `SecIdentity` as `kSecValueRef`.
    static func isIdentityQuery(_ query: [String: ItemValue]) -> Bool {
        if query["class"] == .string("idnt") { return true }
        if case .valueReference(let reference)? = query["v_Ref"], reference.kind == .identity { return true }
        return false
    }

    /// The `SecIdentity` a dictionary holds as `kSecValueRef`.
    static func valueIdentity(in dictionary: CFDictionary) -> SecIdentity? {
        var found: SecIdentity?
        dictionary.enumerateKeysAndObjects { key, value, stop in
            let name = (key as? String) ?? (key as? SecConstantString)?.value
            if name == "v_Ref", let identity = value as? SecIdentity {
                found = identity
                stop.pointee = true
            }
        }
        return found
    }

    /// One identity the keychain holds: the certificate item and the key item that make it.
    private struct Pair {
        let certificate: [String: ItemValue]
        let key: [String: ItemValue]
    }

    /// The identities the query finds, in the shape it asks for (`kSecReturnRef`: identities;
    /// `kSecReturnAttributes`: the certificate's attributes, with `v_Ref` when both are asked).
    static func copyMatching(
        _ query: [String: ItemValue], reference: SecIdentity?, service: any KeychainService
    ) throws -> AnyObject? {
        let wantRef = query["r_Ref"] == .bool(true)
        let wantAttributes = query["r_Attributes"] == .bool(true)
        // The key's data is read only when an identity object is asked for (a guarded key asks then).
        let pairs = try find(query, reference: reference, readingKeys: wantRef, service: service)
        var identities: [(SecIdentity?, [String: ItemValue])] = []
        for pair in pairs {
            guard wantRef else {
                identities.append((nil, pair.certificate))
                continue
            }
            guard case .data(let der)? = pair.certificate["v_Data"],
                let certificate = SecCertificateCreateWithData(nil, der as CFData),
                case .data(let material)? = pair.key["v_Data"], let key = privateKey(material, pair.key)
            else { continue }
            identities.append((SecIdentity(certificate: certificate, privateKey: key), pair.certificate))
        }
        guard !identities.isEmpty else { throw KeychainError.itemNotFound }
        guard wantRef || wantAttributes else { return nil }
        func shape(_ entry: (SecIdentity?, [String: ItemValue])) -> AnyObject {
            if !wantAttributes, let identity = entry.0 { return identity }
            var attributes = entry.1
            attributes["v_Data"] = nil
            attributes["v_PersistentRef"] = nil
            let dictionary = NSMutableDictionary()
            if let bridged = ValueBridging.object(.dictionary(attributes)) as? NSDictionary {
                dictionary.addEntries(from: bridged as? [AnyHashable: Any] ?? [:])
            }
            dictionary["class"] = "idnt" as NSString
            if let identity = entry.0 { dictionary["v_Ref"] = identity }
            return dictionary
        }
        return limit(of: query) == 1 ? shape(identities[0]) : identities.prefix(limit(of: query)).map(shape) as NSArray
    }

    /// Deletes every identity the query finds: its certificate, then its private key (as Apple does).
    /// Nobody is asked (deleting never is); a key shared by several certificates goes with the first.
    static func delete(_ query: [String: ItemValue], reference: SecIdentity?, service: any KeychainService) throws {
        let pairs = try find(query, reference: reference, readingKeys: false, service: service, all: true)
        guard !pairs.isEmpty else { throw KeychainError.itemNotFound }
        for pair in pairs {
            for (itemClass, item) in [("cert", pair.certificate), ("keys", pair.key)] {
                guard case .data(let persistent)? = item["v_PersistentRef"] else {
                    throw KeychainError.internalError("an identity's item came back without its reference")
                }
                do {
                    try service.delete(["class": .string(itemClass), "v_PersistentRef": .data(persistent)])
                } catch let error as KeychainError where error.code == .itemNotFound {
                    // Already gone with an earlier pair (two certificates of one key).
                }
            }
        }
    }

    /// An add of an identity: its certificate, then its private key.
    static func add(_ identity: SecIdentity, query: [String: ItemValue], service: any KeychainService) throws {
        var certificate = query
        certificate["class"] = nil
        certificate["v_Ref"] = nil
        let certificateItem = try KeyItems.addition(of: identity.certificate, to: certificate)
        let keyItem = try KeyItems.addition(of: identity.privateKey, to: certificate)
        _ = try service.add(certificateItem)
        do {
            _ = try service.add(keyItem)
        } catch let error as KeychainError where error.code == .duplicateItem {
            // The key was already there (an identity made from a stored key): the certificate joins it.
        }
    }

    /// The certificate–key pairs the query names. Certificates without a private key are no identity.
    private static func find(
        _ query: [String: ItemValue], reference: SecIdentity?, readingKeys: Bool, service: any KeychainService,
        all: Bool = false
    ) throws -> [Pair] {
        var certificateTerms: [String: ItemValue] = [:]
        var keyTerms: [String: ItemValue] = [:]
        for (name, value) in query {
            switch name {
            case "class", "v_Ref", "v_Data", "r_Data", "r_Attributes", "r_Ref", "r_PersistentRef", "m_Limit":
                continue
            case _ where name.hasPrefix("u_"):
                // Use options (context, prompt, UI skip) hold for both halves.
                certificateTerms[name] = value
                keyTerms[name] = value
            case _ where IdentityAttributes.constrainsKey(name):
                keyTerms[name] = value
            default:
                certificateTerms[name] = value
            }
        }
        if let reference {
            // An identity object names its certificate by the certificate primary key.
            let own = try KeyItems.matchingTerms(of: reference.certificate)
            for (name, value) in own { certificateTerms[name] = value }
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
        let limit = all ? Int.max : limit(of: query)
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
            do {
                guard case .dictionary(let key)? = try service.copyMatching(terms) else { continue }
                pairs.append(Pair(certificate: certificate, key: key))
            } catch let error as KeychainError where error.code == .itemNotFound {
                continue
            }
        }
        return pairs
    }

    /// How many identities the query asks for (`kSecMatchLimit`; one by default).
    private static func limit(of query: [String: ItemValue]) -> Int {
        switch query["m_Limit"] {
        case .string("m_LimitAll")?: Int.max
        case .integer(let limit)? where limit > 1: Int(clamping: limit)
        default: 1
        }
    }

    private static func privateKey(_ material: Data, _ attributes: [String: ItemValue]) -> SecKey? {
        let hint: AsymmetricKey.KindHint
        switch attributes["type"] {
        case .integer(42)?, .string("42")?: hint = .rsa
        case .integer(73)?, .string("73")?: hint = .ec
        default: return nil
        }
        return (try? AsymmetricKey.importing(material, kind: hint, isPrivate: true)).map { SecKey(key: $0) }
    }
}
