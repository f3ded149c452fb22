import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto

/// A key: an RSA or elliptic-curve key pair or public key, held by OpenSSL (`AsymmetricKey`), or an
/// enclave key, whose private half the keychain service holds and uses. Keys are equal when they are
/// the same key: the same type, class and public key.
public final class SecKey: SecObject, @unchecked Sendable {
    // Immutable: the key object, and the attributes it was made with.
    /// The key; for an enclave key, its public key.
    let key: AsymmetricKey
    /// Attributes given at creation (label and application tag), kept for `SecKeyCopyAttributes`.
    let extraAttributes: [String: ItemValue]
    /// Set for an enclave key's private key: how to ask the keychain service to use it.
    let enclave: EnclaveKeyReference?

    /// Whether this is a private key (an enclave key's is, though only its public key is here).
    var isPrivate: Bool { enclave != nil || key.isPrivate }

    /// The attributes a key keeps from its creation or its item; every other one describes the key
    /// itself or its storage, and is computed.
    static let keptAttributeNames: Set<String> = ["labl", "atag"]

    init(key: AsymmetricKey, attributes: [String: ItemValue] = [:], enclave: EnclaveKeyReference? = nil) {
        self.key = key
        self.enclave = enclave
        extraAttributes = attributes.filter { Self.keptAttributeNames.contains($0.key) }
    }

    override func isSame(as other: SecObject) -> Bool {
        guard let other = other as? SecKey else { return false }
        guard isPrivate == other.isPrivate, key.kind == other.key.kind else { return false }
        guard let left = try? key.publicRepresentation(), let right = try? other.key.publicRepresentation() else {
            return self === other
        }
        return left == right
    }

    public override func hash(into hasher: inout Hasher) {
        hasher.combine(isPrivate)
        hasher.combine((try? key.publicRepresentation()) ?? Data())
    }
}

// MARK: Errors

/// A CFError in Apple's OSStatus domain, as the SecKey functions report failures.
func fail(
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ status: OSStatus, _ reason: String
) {
    error?.pointee = Unmanaged.passRetained(
        NSError(
            domain: String(kCFErrorDomainOSStatus), code: Int(status),
            userInfo: [NSLocalizedDescriptionKey: reason]))
}

func fail(_ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ failure: AsymmetricKey.Failure) {
    switch failure {
    case .invalidKey(let reason): fail(error, errSecParam, reason)
    case .unsupported(let reason): fail(error, errSecParam, reason)
    case .library(let reason): fail(error, errSecInternalComponent, "OpenSSL: \(reason)")
    }
}

// MARK: Creating keys

/// Makes a new key pair and returns its private key. `kSecAttrKeyType` (RSA or EC) and
/// `kSecAttrKeySizeInBits` are required; RSA sizes from 1024 to 8192 bits in steps of 8, EC 192, 224,
/// 256, 384 or 521 (else errSecKeySizeNotAllowed). With `kSecAttrIsPermanent` (top level or in
/// `kSecPrivateKeyAttrs`/`kSecPublicKeyAttrs`) the keys are added to the keychain. With
/// `kSecAttrTokenID` = `kSecAttrTokenIDSecureEnclave`, the keychain service makes and keeps a P-256
/// enclave key (see `EnclaveKeys`).
public func SecKeyCreateRandomKey(
    _ parameters: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    guard let values = try? ValueBridging.dictionary(parameters) else {
        fail(error, errSecParam, "the parameters' keys must be strings")
        return nil
    }
    guard case .string(let type)? = values["type"], type == "42" || type == "73" else {
        fail(error, errSecParam, "incorrect or missing kSecAttrKeyType")
        return nil
    }
    let bits: Int
    switch values["bsiz"] {
    case .integer(let number)?: bits = Int(number)
    case .string(let text)?:
        guard let number = Int(text) else {
            fail(error, errSecParam, "kSecAttrKeySizeInBits is not a number")
            return nil
        }
        bits = number
    default:
        fail(error, errSecParam, "missing kSecAttrKeySizeInBits")
        return nil
    }
    // Each key's attributes: the top level's, under its own sub-dictionary's (which win).
    let top = (parameters as NSDictionary) as? [String: Any] ?? [:]
    func merged(_ name: String) -> [String: Any] {
        let intrinsic = ["type", "bsiz", "esiz", "kcls", "private", "public"]
        var attributes = top.filter { !intrinsic.contains($0.key) }
        for (key, value) in (top[name] as? [String: Any]) ?? [:] where !intrinsic.contains(key) {
            attributes[key] = value
        }
        return attributes
    }
    if merged("private")["tkid"] != nil {
        return EnclaveKeys.create(
            type: type, bits: bits, privateAttributes: merged("private"), publicAttributes: merged("public"),
            error)
    }
    let kind: AsymmetricKey.Kind
    if type == "42" {
        guard (1024...8192).contains(bits), bits % 8 == 0 else {
            fail(error, errSecKeySizeNotAllowed, "RSA keys are 1024 to 8192 bits, in steps of 8")
            return nil
        }
        kind = .rsa(bits: bits)
    } else {
        guard let curve = AsymmetricKey.Curve(rawValue: bits) else {
            fail(error, errSecKeySizeNotAllowed, "EC keys are 192, 224, 256, 384 or 521 bits")
            return nil
        }
        kind = .ec(curve)
    }
    let generated: AsymmetricKey
    do {
        generated = try AsymmetricKey.generate(kind)
    } catch let failure {
        fail(error, failure)
        return nil
    }
    let privateAttributes = merged("private")
    let publicAttributes = merged("public")
    let privateKey = SecKey(key: generated, attributes: keptAttributes(privateAttributes))
    // Permanent keys are added to the keychain as kSecValueRef items (the public key too when its
    // attributes say so); a failed add fails the call with its status, and takes back what it added.
    let keys = [(privateKey, privateAttributes), (SecKeyCopyPublicKey(privateKey), publicAttributes)]
    guard storePermanent(keys.compactMap { key, attributes in key.map { ($0, attributes) } }, error) else {
        return nil
    }
    return privateKey
}

/// Adds each key whose attributes say `kSecAttrIsPermanent` as a kSecValueRef item; a failed add fails
/// the call with its status, and takes back what it added.
func storePermanent(_ keys: [(SecKey, [String: Any])], _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> Bool {
    var added: [SecKey] = []
    for (key, attributes) in keys where isTrue(attributes["perm"]) {
        var item = attributes.filter { $0.key != "perm" }
        item["class"] = "keys"
        item["v_Ref"] = key
        let status = SecItemAdd(item as CFDictionary, nil)
        guard status == errSecSuccess else {
            for stored in added {
                var query: [String: Any] = ["v_Ref": stored]
                if let group = item["agrp"] { query["agrp"] = group }
                SecItemDelete(query as CFDictionary)
            }
            fail(error, status, "the key could not be stored in the keychain")
            return false
        }
        added.append(key)
    }
    return true
}

func isTrue(_ value: Any?) -> Bool {
    switch value {
    case let flag as Bool: flag
    case let number as NSNumber: number.boolValue
    default: false
    }
}

/// The kept attributes of a creation dictionary, bridged (only they: the others need not bridge).
func keptAttributes(_ attributes: [String: Any]) -> [String: ItemValue] {
    let kept = attributes.filter { SecKey.keptAttributeNames.contains($0.key) }
    return (try? ValueBridging.dictionary(kept as CFDictionary)) ?? [:]
}

/// A key from its external representation: `kSecAttrKeyType` and `kSecAttrKeyClass` (public or
/// private) are required.
public func SecKeyCreateWithData(
    _ keyData: CFData, _ attributes: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    guard let values = try? ValueBridging.dictionary(attributes) else {
        fail(error, errSecParam, "the attributes' keys must be strings")
        return nil
    }
    guard case .string(let type)? = values["type"], type == "42" || type == "73" else {
        fail(error, errSecParam, "incorrect or missing kSecAttrKeyType")
        return nil
    }
    let isPrivate: Bool
    switch values["kcls"] {
    case .string("0")?, .integer(0)?: isPrivate = false
    case .string("1")?, .integer(1)?: isPrivate = true
    default:
        fail(error, errSecParam, "incorrect or missing kSecAttrKeyClass (public or private)")
        return nil
    }
    do {
        let key = try AsymmetricKey.importing(
            keyData.contiguousData, kind: type == "42" ? .rsa : .ec, isPrivate: isPrivate)
        if let expected = values["bsiz"], expected != .integer(Int64(key.bits)), expected != .string("\(key.bits)") {
            fail(error, errSecParam, "the key is \(key.bits) bits, not the kSecAttrKeySizeInBits given")
            return nil
        }
        return SecKey(key: key, attributes: values)
    } catch let failure {
        fail(error, failure)
        return nil
    }
}

public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? {
    guard let publicKey = try? key.key.publicKey() else { return nil }
    return publicKey === key.key && key.enclave == nil
        ? key : SecKey(key: publicKey, attributes: key.extraAttributes)
}

/// PKCS#1 for RSA keys, ANSI X9.63 (`04‖X‖Y`, and `‖K` for a private key) for EC keys.
public func SecKeyCopyExternalRepresentation(
    _ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    if key.enclave != nil {
        fail(error, errSecUnimplemented, "an enclave key's private key cannot be exported")
        return nil
    }
    do {
        let bytes = try key.key.externalRepresentation()
        return bytes.withUnsafeBytes { Data($0) } as NSData
    } catch let failure {
        fail(error, failure)
        return nil
    }
}

/// Apple's attribute dictionary of a software key (spec §8.1).
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    ValueBridging.object(.dictionary(key.itemAttributes(includingData: true))) as? NSDictionary
}

extension SecKey {
    /// Apple's attributes of this key, with its data (`v_Data`: the private key for a private key)
    /// only when asked for.
    func itemAttributes(includingData: Bool) -> [String: ItemValue] {
        itemAttributeValues(self, includingData: includingData)
    }
}

private func itemAttributeValues(_ key: SecKey, includingData: Bool) -> [String: ItemValue] {
    let isPrivate = key.isPrivate
    var values: [String: ItemValue] = [
        "class": .string("keys"), "kcls": .integer(isPrivate ? 1 : 0),
        "type": .integer(key.key.kind == .rsa(bits: key.key.bits) ? 42 : 73), "bsiz": .integer(Int64(key.key.bits)),
        "esiz": .integer(Int64(key.key.bits)), "perm": .bool(true), "priv": .bool(true), "modi": .bool(true),
        "sens": .bool(false), "asen": .bool(false), "extr": .bool(true), "next": .bool(false), "drve": .bool(true),
        "encr": .bool(!isPrivate), "vrfy": .bool(!isPrivate), "wrap": .bool(!isPrivate), "decr": .bool(isPrivate),
        "sign": .bool(isPrivate), "unwp": .bool(isPrivate), "snrc": .bool(false), "vyrc": .bool(false),
    ]
    if case .rsa = key.key.kind { values["type"] = .integer(42) }
    if let publicBytes = try? key.key.publicRepresentation(), let label = try? Digest.sha1(publicBytes) {
        values["klbl"] = .data(label)
    }
    if let enclave = key.enclave {
        // Made and held by the keychain: never extractable; its data is its public key.
        values["tkid"] = .string(enclaveTokenID)
        values["perm"] = .bool(enclave.token == nil)
        values["extr"] = .bool(false)
        values["sens"] = .bool(true)
        values["asen"] = .bool(true)
        values["next"] = .bool(true)
        values["unwp"] = .bool(false)
        if includingData, let publicKey = try? key.key.publicRepresentation() { values["v_Data"] = .data(publicKey) }
    } else if includingData, let representation = try? key.key.externalRepresentation() {
        values["v_Data"] = .secret(representation)
    }
    values.merge(key.extraAttributes) { $1 }
    return values
}

/// The key's block size in bytes: the modulus for RSA, the key size for EC.
public func SecKeyGetBlockSize(_ key: SecKey) -> Int { key.key.blockSize }

// MARK: Operations

public func SecKeyIsAlgorithmSupported(
    _ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm
) -> Bool {
    switch operation {
    case .sign:
        guard key.isPrivate, let scheme = algorithm.signatureScheme else { return false }
        if key.enclave != nil, case .rsaPKCS1v15 = scheme { return false }
        return key.key.supports(scheme)
    case .verify:
        guard let scheme = algorithm.signatureScheme else { return false }
        return key.key.supports(scheme)
    case .encrypt:
        if case .ec = key.key.kind { return algorithm.eciesScheme != nil }
        if let hash = algorithm.rsaHybridHash { return key.key.supportsRSAHybrid(hash: hash) }
        return algorithm.encryptionScheme != nil
    case .decrypt:
        guard key.isPrivate else { return false }
        if case .ec = key.key.kind { return algorithm.eciesScheme != nil }
        if let hash = algorithm.rsaHybridHash { return key.key.supportsRSAHybrid(hash: hash) }
        return algorithm.encryptionScheme != nil
    case .keyExchange:
        guard case .ec = key.key.kind, key.isPrivate else { return false }
        return algorithm.keyExchangeKDF != nil
    }
}

public func SecKeyCreateSignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ dataToSign: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    guard let scheme = algorithm.signatureScheme, key.key.supports(scheme), key.isPrivate else {
        fail(error, errSecParam, "\(algorithm.name) is not supported by this key")
        return nil
    }
    if let enclave = key.enclave {
        return enclaveSignature(enclave, scheme, dataToSign.contiguousData, error) as NSData?
    }
    do {
        return try key.key.sign(dataToSign.contiguousData, scheme) as NSData
    } catch let failure {
        fail(error, failure)
        return nil
    }
}

public func SecKeyVerifySignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ signedData: CFData, _ signature: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Bool {
    guard let scheme = algorithm.signatureScheme, key.key.supports(scheme) else {
        fail(error, errSecParam, "\(algorithm.name) is not supported by this key")
        return false
    }
    do {
        guard try key.key.verify(signature.contiguousData, of: signedData.contiguousData, scheme) else {
            fail(error, errSecVerifyFailed, "the signature does not verify")
            return false
        }
        return true
    } catch let failure {
        fail(error, failure)
        return false
    }
}

public func SecKeyCreateEncryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ plaintext: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    if let ecies = algorithm.eciesScheme {
        return run(error) { () throws(AsymmetricKey.Failure) in
            try key.key.eciesEncrypt(plaintext.contiguousData, ecies)
        }
    }
    if let hash = algorithm.rsaHybridHash {
        return run(error) { () throws(AsymmetricKey.Failure) in
            try key.key.rsaHybridEncrypt(plaintext.contiguousData, hash: hash)
        }
    }
    return cipher(algorithm, error) { scheme throws(AsymmetricKey.Failure) in
        try key.key.publicKey().encrypt(plaintext.contiguousData, scheme)
    }
}

public func SecKeyCreateDecryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ ciphertext: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    if let ecies = algorithm.eciesScheme, let enclave = key.enclave {
        return enclave.eciesDecrypt(ciphertext.contiguousData, ecies, publicKey: key.key, error)
    }
    if key.enclave != nil {
        fail(error, errSecParam, "\(algorithm.name) is not supported by this key")
        return nil
    }
    if let ecies = algorithm.eciesScheme {
        return run(error) { () throws(AsymmetricKey.Failure) in
            try key.key.eciesDecrypt(ciphertext.contiguousData, ecies).withUnsafeBytes { Data($0) }
        }
    }
    if let hash = algorithm.rsaHybridHash {
        return run(error) { () throws(AsymmetricKey.Failure) in
            try key.key.rsaHybridDecrypt(ciphertext.contiguousData, hash: hash).withUnsafeBytes { Data($0) }
        }
    }
    return cipher(algorithm, error) { scheme throws(AsymmetricKey.Failure) in
        try key.key.decrypt(ciphertext.contiguousData, scheme).withUnsafeBytes { Data($0) }
    }
}

/// An operation's bytes, its failures as the CFError.
private func run(
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ body: () throws(AsymmetricKey.Failure) -> Data
) -> CFData? {
    do {
        return try body() as NSData
    } catch let failure {
        fail(error, failure)
        return nil
    }
}

/// An encryption or decryption under `algorithm`, its failures as the CFError.
private func cipher(
    _ algorithm: SecKeyAlgorithm, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?,
    _ body: (EncryptionScheme) throws(AsymmetricKey.Failure) -> Data
) -> CFData? {
    guard let scheme = algorithm.encryptionScheme else {
        fail(error, errSecParam, "\(algorithm.name) is not supported by this key")
        return nil
    }
    do {
        return try body(scheme) as NSData
    } catch let failure {
        fail(error, failure)
        return nil
    }
}

/// ECDH between `privateKey` and `publicKey`: the raw shared secret, or (with an X9.63 algorithm)
/// `kSecKeyKeyExchangeParameterRequestedSize` bytes of the X9.63 KDF over it with the
/// `kSecKeyKeyExchangeParameterSharedInfo` given.
public func SecKeyCopyKeyExchangeResult(
    _ privateKey: SecKey, _ algorithm: SecKeyAlgorithm, _ publicKey: SecKey, _ parameters: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    guard let kdf = algorithm.keyExchangeKDF, case .ec = privateKey.key.kind, privateKey.isPrivate else {
        fail(error, errSecParam, "\(algorithm.name) is not supported by this key")
        return nil
    }
    let values = (try? ValueBridging.dictionary(parameters)) ?? [:]
    let shared: SecureBytes
    if let enclave = privateKey.enclave {
        guard let peer = try? publicKey.key.publicRepresentation(), publicKey.key.kind == privateKey.key.kind else {
            fail(error, errSecParam, "the public key is not on the private key's curve")
            return nil
        }
        guard let agreed = enclave.perform(.sharedSecret(peerPublicKey: peer), error) else { return nil }
        shared = agreed
    } else {
        do {
            shared = try privateKey.key.sharedSecret(with: publicKey.key)
        } catch let failure {
            fail(error, failure)
            return nil
        }
    }
    guard let hash = kdf else { return shared.withUnsafeBytes { Data($0) } as NSData }
    guard case .integer(let size)? = values["requestedSize"], (1...4096).contains(size) else {
        fail(error, errSecParam, "an X9.63 key exchange needs kSecKeyKeyExchangeParameterRequestedSize (1 to 4096)")
        return nil
    }
    var sharedInfo = Data()
    switch values["sharedInfo"] {
    case nil: break
    case .data(let info)?: sharedInfo = info
    default:
        fail(error, errSecParam, "kSecKeyKeyExchangeParameterSharedInfo must be data")
        return nil
    }
    do {
        let derived = try KeyDerivation.x963(secret: shared, sharedInfo: sharedInfo, hash: hash, length: Int(size))
        return derived.withUnsafeBytes { Data($0) } as NSData
    } catch _ {
        fail(error, errSecInternalComponent, "the X9.63 KDF failed")
        return nil
    }
}
