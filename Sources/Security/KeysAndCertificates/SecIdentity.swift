import Foundation
import KeychainCore
import KeychainCrypto

/// A certificate and its private key. Equal when both are.
public final class SecIdentity: SecObject, @unchecked Sendable {
    // Immutable.
    let certificate: SecCertificate
    let privateKey: SecKey

    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }

    override func isSame(as other: SecObject) -> Bool {
        guard let other = other as? SecIdentity else { return false }
        return certificate == other.certificate && privateKey == other.privateKey
    }

    public override func hash(into hasher: inout Hasher) { hasher.combine(certificate) }
}

public func SecIdentityCopyCertificate(
    _ identity: SecIdentity, _ certificate: UnsafeMutablePointer<SecCertificate?>
) -> OSStatus {
    certificate.pointee = identity.certificate
    return errSecSuccess
}

public func SecIdentityCopyPrivateKey(_ identity: SecIdentity, _ privateKey: UnsafeMutablePointer<SecKey?>) -> OSStatus
{
    privateKey.pointee = identity.privateKey
    return errSecSuccess
}

/// Opens a PKCS#12 file with `kSecImportExportPassphrase`: one dictionary with the identity
/// (`kSecImportItemIdentity`), the other certificates (`kSecImportItemCertChain`, the identity's first),
/// its label and key identifier. A wrong password → errSecAuthFailed; data that is no PKCS#12 →
/// errSecDecode. Nothing is added to the keychain (as on Apple's platforms).
public func SecPKCS12Import(
    _ pkcs12Data: CFData, _ options: CFDictionary, _ items: UnsafeMutablePointer<CFArray?>
) -> OSStatus {
    let values = (try? ValueBridging.dictionary(options)) ?? [:]
    var password = ""
    if case .string(let given)? = values["passphrase"] { password = given }
    let bundle: PKCS12Bundle
    do {
        bundle = try PKCS12Bundle.open(pkcs12Data as Data, password: password)
    } catch .wrongPassword {
        return errSecAuthFailed
    } catch .malformed {
        return errSecDecode
    } catch {
        return errSecUnimplemented
    }
    let certificate = SecCertificate(bundle.certificate)
    let identity = SecIdentity(certificate: certificate, privateKey: SecKey(key: bundle.key))
    let item = NSMutableDictionary()
    item["identity"] = identity
    item["chain"] = NSArray(array: [certificate] + bundle.chain.map(SecCertificate.init))
    if let label = bundle.label { item["label"] = label as NSString }
    if let publicKey = try? bundle.key.publicRepresentation(), let keyID = try? Digest.sha1(publicKey) {
        item["keyid"] = keyID as NSData
    }
    items.pointee = NSArray(array: [item])
    return errSecSuccess
}

/// Identities in the keychain: `kSecClassIdentity` queries pair each certificate with the private key
/// whose `klbl` is the certificate's `pkhh`; adding an identity adds both.
enum IdentityItems {
    static func isIdentityQuery(_ query: [String: ItemValue]) -> Bool { query["class"] == .string("idnt") }

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

    /// The identities the query finds, in the shape it asks for (`kSecReturnRef`: identities;
    /// `kSecReturnAttributes`: the certificate's attributes, with `v_Ref` when both are asked).
    static func copyMatching(_ query: [String: ItemValue], service: any KeychainService) throws -> AnyObject? {
        var certificates = query
        certificates["class"] = .string("cert")
        certificates["r_Data"] = .bool(true)
        certificates["r_Attributes"] = .bool(true)
        certificates["r_Ref"] = nil
        certificates["m_Limit"] = .string("m_LimitAll")
        guard case .array(let found)? = try service.copyMatching(certificates) else {
            throw KeychainError.itemNotFound
        }
        var identities: [(SecIdentity, [String: ItemValue])] = []
        for result in found {
            guard case .dictionary(let attributes) = result, case .data(let der)? = attributes["v_Data"],
                case .data(let hash)? = attributes["pkhh"],
                let certificate = SecCertificateCreateWithData(nil, der as CFData)
            else { continue }
            let keyQuery: [String: ItemValue] = [
                "class": .string("keys"), "kcls": .integer(1), "klbl": .data(hash), "r_Data": .bool(true),
                "r_Attributes": .bool(true),
            ]
            guard let keyResult = try? service.copyMatching(keyQuery), case .dictionary(let keyAttributes) = keyResult,
                case .data(let material)? = keyAttributes["v_Data"], let key = privateKey(material, keyAttributes)
            else { continue }
            identities.append((SecIdentity(certificate: certificate, privateKey: key), attributes))
        }
        guard !identities.isEmpty else { throw KeychainError.itemNotFound }
        let wantRef = query["r_Ref"] == .bool(true)
        let wantAttributes = query["r_Attributes"] == .bool(true)
        func shape(_ entry: (SecIdentity, [String: ItemValue])) -> AnyObject {
            guard wantAttributes else { return entry.0 }
            var attributes = entry.1
            attributes["v_Data"] = nil
            let dictionary = NSMutableDictionary()
            if let bridged = ValueBridging.object(.dictionary(attributes)) as? NSDictionary {
                dictionary.addEntries(from: bridged as? [AnyHashable: Any] ?? [:])
            }
            dictionary["class"] = "idnt" as NSString
            if wantRef { dictionary["v_Ref"] = entry.0 }
            return dictionary
        }
        let all =
            query["m_Limit"] == .string("m_LimitAll")
            || {
                if case .integer(let limit)? = query["m_Limit"] { return limit > 1 }
                return false
            }()
        guard wantRef || wantAttributes else { return nil }
        return all ? identities.map(shape) as NSArray : shape(identities[0])
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
