import Foundation
import KeychainCore
import KeychainCrypto
import KeychainEngine

/// Keys in the keychain: a `SecKey` given as `kSecValueRef` is stored as a key item (its external
/// representation as the item's data, Apple's key attributes beside it), and `kSecReturnRef` on key
/// items gives `SecKey` objects back. The keychain service sees plain attribute-and-data items; the
/// objects are made here, on either side of it.
enum KeyItems {
    /// The `SecKey` a dictionary holds as `kSecValueRef`, found only when the bridged query says there
    /// is one (the common calls never walk the dictionary twice).
    static func valueKey(in dictionary: CFDictionary, bridged: [String: ItemValue]) -> SecKey? {
        valueObject(in: dictionary, bridged: bridged, kind: .key) as? SecKey
    }

    /// The `SecCertificate` a dictionary holds as `kSecValueRef`.
    static func valueCertificate(in dictionary: CFDictionary, bridged: [String: ItemValue]) -> SecCertificate? {
        valueObject(in: dictionary, bridged: bridged, kind: .certificate) as? SecCertificate
    }

    private static func valueObject(
        in dictionary: CFDictionary, bridged: [String: ItemValue], kind: ValueReference.Kind
    ) -> SecObject? {
        guard case .valueReference(let reference)? = bridged["v_Ref"], reference.kind == kind else { return nil }
        return valueObject(in: dictionary)
    }

    /// The object (key, certificate or identity) a dictionary holds as `kSecValueRef`.
    static func valueObject(in dictionary: CFDictionary) -> SecObject? {
        var found: SecObject?
        dictionary.enumerateKeysAndObjects { key, value, stop in
            let name = (key as? String) ?? (key as? SecConstantString)?.value
            if name == "v_Ref", let object = value as? SecObject {
                found = object
                stop.pointee = true
            }
        }
        return found
    }

    /// An add of `certificate`: a `kSecClassCertificate` item whose data is the DER, with the
    /// attributes Apple computes (spec §8.1): `ctyp`, `cenc`, `subj`, `issr`, `slnr`, `skid`, `pkhh`
    /// (the SHA-1 of the public key, which is the private key's `klbl`) and the subject summary as the
    /// default label.
    static func addition(of certificate: SecCertificate, to query: [String: ItemValue]) throws -> [String: ItemValue] {
        var item = query
        item["v_Ref"] = nil
        if let itemClass = item["class"], itemClass != .string("cert") {
            throw KeychainError.invalidParameter("a SecCertificate is added as kSecClassCertificate")
        }
        if item["v_Data"] != nil { throw KeychainError.invalidParameter("kSecValueRef and kSecValueData together") }
        item["class"] = .string("cert")
        item["v_Data"] = .data(certificate.certificate.der)
        for (name, value) in try CertificateAttributes.of(certificate.certificate) where item[name] == nil {
            item[name] = value
        }
        return item
    }

    /// An add of `key`: the item's class is `kSecClassKey` (another class is errSecParam), its data the
    /// key's external representation, and Apple's attributes of the key fill what the caller left out.
    static func addition(of key: SecKey, to query: [String: ItemValue]) throws -> [String: ItemValue] {
        var item = query
        item["v_Ref"] = nil
        if let itemClass = item["class"], itemClass != .string("keys") {
            throw KeychainError.invalidParameter("a SecKey is added as kSecClassKey")
        }
        item["class"] = .string("keys")
        if item["v_Data"] != nil { throw KeychainError.invalidParameter("kSecValueRef and kSecValueData together") }
        // A stored enclave key exists only as its item, made with it; an ephemeral one is stored by
        // its token, which the service opens.
        if let enclave = key.enclave {
            guard let token = enclave.token else { throw KeychainError.duplicateItem }
            for name in ["kcls", "type", "bsiz", "esiz"] where item[name] != nil {
                throw KeychainError.invalidParameter("\(name) describes the enclave key itself")
            }
            item["tkid"] = .string(enclaveTokenID)
            item["toid"] = .data(token)
            return item
        }
        // What the key is (its class, type and sizes) is the key's to say: a caller's other value is an
        // error, never stored (a private key labelled public would be returned to public-key queries).
        let own = try attributes(of: key)
        for name in ["kcls", "type", "bsiz", "esiz"] {
            if let given = item[name], let actual = own[name], !sameNumber(given, actual) {
                throw KeychainError.invalidParameter("\(name) does not describe the key given as kSecValueRef")
            }
            item[name] = own[name]
        }
        for (name, value) in own where item[name] == nil { item[name] = value }
        do {
            item["v_Data"] = .secret(try key.key.externalRepresentation())
        } catch {
            throw KeychainError.invalidParameter("the key cannot be exported into the keychain")
        }
        return item
    }

    /// A query naming a key by `kSecValueRef`: it matches the item of that key (its class, label and type).
    static func matching(_ key: SecKey, in query: [String: ItemValue]) throws -> [String: ItemValue] {
        var terms = query
        terms["v_Ref"] = nil
        terms["class"] = .string("keys")
        let attributes = try attributes(of: key)
        for name in ["kcls", "klbl", "type", "bsiz", "esiz"] { terms[name] = attributes[name] }
        return terms
    }

    /// A query naming a certificate by `kSecValueRef`: it matches the item of that certificate, by
    /// Apple's certificate primary key (type, issuer, serial number).
    static func matching(_ certificate: SecCertificate, in query: [String: ItemValue]) throws -> [String: ItemValue] {
        var terms = query
        terms["v_Ref"] = nil
        if let itemClass = terms["class"], itemClass != .string("cert") {
            throw KeychainError.invalidParameter("a SecCertificate names a kSecClassCertificate item")
        }
        for (name, value) in try matchingTerms(of: certificate) { terms[name] = value }
        return terms
    }

    /// The terms that name `certificate`'s item: its class and primary key, and its key's hash.
    static func matchingTerms(of certificate: SecCertificate) throws -> [String: ItemValue] {
        try CertificateAttributes.matchingTerms(of: certificate.certificate)
    }

    /// What the service is asked instead of `kSecReturnRef` on key items: the data and the attributes,
    /// from which the key objects are made.
    static func wantsKeyObjects(_ query: [String: ItemValue]) -> Bool {
        query["r_Ref"] == .bool(true) && (query["class"] == .string("keys") || query["class"] == .string("cert"))
    }

    /// The persistent reference too: an enclave key's `SecKey` names its item by it.
    static func askingForKeyMaterial(_ query: [String: ItemValue]) -> [String: ItemValue] {
        var asked = query
        asked["r_Ref"] = nil
        asked["r_Data"] = .bool(true)
        asked["r_Attributes"] = .bool(true)
        asked["r_PersistentRef"] = .bool(true)
        return asked
    }

    /// The answer in the shape the caller asked for, with `SecKey` objects: the key alone, or a
    /// dictionary with `v_Ref` beside what else was asked for; an array for a match limit above one.
    static func objects(from answer: ItemResult, query: [String: ItemValue]) throws -> AnyObject {
        let wantData = query["r_Data"] == .bool(true)
        let wantAttributes = query["r_Attributes"] == .bool(true)
        let wantPersistent = query["r_PersistentRef"] == .bool(true)
        func shape(_ result: ItemResult) throws -> AnyObject {
            guard case .dictionary(var values) = result, let material = values["v_Data"] else {
                throw KeychainError.internalError("a key item came back without its data")
            }
            let key: SecObject =
                values["class"] == .string("cert") || query["class"] == .string("cert")
                ? try makeCertificate(material.bytes ?? Data())
                : try makeKey(material, attributes: values, options: query)
            guard wantData || wantAttributes || wantPersistent else { return key }
            if !wantData { values["v_Data"] = nil }
            if !wantPersistent { values["v_PersistentRef"] = nil }
            if !wantAttributes { values = values.filter { $0.key == "v_Data" || $0.key == "v_PersistentRef" } }
            return resultDictionary(values, reference: key)
        }
        // An item that cannot be made into an object is left out of an array (one bad item in a
        // shared group must not hide every other); alone, it is not found.
        if case .array(let results) = answer { return results.compactMap { try? shape($0) } as NSArray }
        do {
            return try shape(answer)
        } catch {
            throw KeychainError.itemNotFound
        }
    }

    /// An answer's attributes as the dictionary Apple returns, with the object as `v_Ref` when there is one.
    static func resultDictionary(_ values: [String: ItemValue], reference: SecObject?) -> NSMutableDictionary {
        let dictionary = NSMutableDictionary()
        if let bridged = ValueBridging.object(.dictionary(values)) as? NSDictionary {
            dictionary.addEntries(from: bridged as? [AnyHashable: Any] ?? [:])
        }
        if let reference { dictionary["v_Ref"] = reference }
        return dictionary
    }

    private static func makeCertificate(_ der: Data) throws -> SecCertificate {
        guard let certificate = SecCertificateCreateWithData(nil, der as CFData) else {
            throw KeychainError.invalidParameter("the certificate item's data is not a certificate")
        }
        return certificate
    }

    /// The `SecKey` of a key item: its data read as the key its class and type name. An enclave key's
    /// data is its public key, and its `SecKey` names the item (its persistent reference, which must be
    /// among the attributes) with the authentication `options` of the query that found it.
    /// A key from an item's data as the service answered it: a private key's material is read where it
    /// lies, in wiped memory, and never copied into a plain buffer.
    static func makeKey(
        _ material: ItemValue, attributes: [String: ItemValue], options: [String: ItemValue] = [:]
    ) throws -> SecKey {
        guard
            let key = try material.withBorrowedBytes({ bytes in
                try makeKey(bytes, attributes: attributes, options: options)
            })
        else { throw KeychainError.internalError("a key item came back with data that is not bytes") }
        return key
    }

    static func makeKey(_ material: Data, attributes: [String: ItemValue], options: [String: ItemValue] = [:]) throws
        -> SecKey
    {
        let isPrivate: Bool
        switch attributes["kcls"] {
        case .integer(1)?, .string("1")?: isPrivate = true
        case .integer(0)?, .string("0")?: isPrivate = false
        default: throw KeychainError.invalidParameter("only public and private keys are made into SecKey objects")
        }
        let hint: AsymmetricKey.KindHint
        switch attributes["type"] {
        case .integer(42)?, .string("42")?: hint = .rsa
        case .integer(73)?, .string("73")?: hint = .ec
        default: throw KeychainError.invalidParameter("only RSA and EC keys are made into SecKey objects")
        }
        if attributes["tkid"] == .string(enclaveTokenID), isPrivate {
            guard hint == .ec, let publicKey = try? AsymmetricKey.importing(material, kind: .ec, isPrivate: false)
            else { throw KeychainError.invalidParameter("the enclave key item is not one this keychain made") }
            let enclave: EnclaveKeyReference
            switch (attributes["v_PersistentRef"], attributes["toid"]) {
            case (.data(let reference)?, _):
                enclave = EnclaveKeyReference(persistentReference: reference, options: options)
            case (nil, .data(let token)?): enclave = EnclaveKeyReference(token: token, options: options)
            default: throw KeychainError.invalidParameter("the enclave key names neither its item nor its token")
            }
            return SecKey(key: publicKey, attributes: attributes, enclave: enclave)
        }
        do {
            let key = try AsymmetricKey.importing(material, kind: hint, isPrivate: isPrivate)
            return SecKey(key: key, attributes: attributes)
        } catch {
            throw KeychainError.invalidParameter("the key item's data is not a key of its type")
        }
    }

    /// Apple's attributes of a software key (spec §8.1), its data included.
    /// Apple's attributes of a software key, without its data (no private key bytes are exported to
    /// read them).
    static func attributes(of key: SecKey) throws -> [String: ItemValue] {
        var values = key.itemAttributes(includingData: false)
        values["class"] = nil
        return values
    }

    private static func sameNumber(_ left: ItemValue, _ right: ItemValue) -> Bool {
        func number(_ value: ItemValue) -> Int64? {
            switch value {
            case .integer(let number): number
            case .string(let text): Int64(text)
            case .bool(let flag): flag ? 1 : 0
            default: nil
            }
        }
        return number(left) != nil && number(left) == number(right)
    }
}
