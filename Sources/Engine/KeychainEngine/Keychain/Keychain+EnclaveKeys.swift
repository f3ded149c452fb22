import FoundationEssentials
import KeychainBytes
import KeychainCrypto
import KeychainKeybag
import KeychainStorage

/// Enclave keys (`kSecAttrTokenIDSecureEnclave`): P-256 keys whose private half is made here, wrapped
/// by the device root, stored as the key item's secret, and used here; no answer ever carries it.
/// Reads give the public key as the item's data; the key's access control (`privateKeyUsage` with
/// its constraints) guards signing and key exchange, by the same sealing as a guarded item's secret.
extension Keychain {
    /// Makes an enclave key. Permanent (the default): stored as a key item with `dictionary`'s
    /// attributes (a SecItemAdd dictionary without data), answered with the item's attributes, its
    /// data (the public key) and its persistent reference. With `kSecAttrIsPermanent` false: stored
    /// nowhere, answered with its attributes, its public key and its token (`toid`).
    public func generateEnclaveKey(_ dictionary: [String: ItemValue], client: ClientIdentity) throws -> ItemResult? {
        try perform { try makeEnclaveKey(dictionary, client: client) }
    }

    /// Whether enclave keys made now are made and used in the device root's hardware (a TPM), their
    /// private halves never in this process; false with the software root.
    public var enclaveKeysAreInHardware: Bool { keybag.enclaveKeyHardware != nil }

    /// Signs with, or agrees a secret with, the enclave key the query names (its item's persistent
    /// reference, or its token), once the key's access control is satisfied (asking the user as a
    /// read would).
    public func useEnclaveKey(
        _ dictionary: [String: ItemValue], operation: EnclaveKeyOperation, client: ClientIdentity
    ) throws -> SecureBytes {
        try perform { try use(dictionary, operation: operation, client: client) }
    }

    /// `SecItemAdd` of an ephemeral enclave key (`Addition.enclaveKeyToken`: its token and the other
    /// attributes): stores it as any enclave key, under the protection and access control it was made
    /// with. The token must still open (its class available, its binding alive); adding asks nobody, as
    /// adding any item does.
    func addEnclaveKeyToken(_ bytes: Data, _ attributes: [String: ItemValue], client: ClientIdentity) throws
        -> ItemResult?
    {
        try insert(try prepareEnclaveKeyToken(bytes, attributes, client: client))
    }

    /// The checks and the sealed row of `addEnclaveKeyToken`, for an add that inserts it in a
    /// transaction of its own (an identity's key).
    func prepareEnclaveKeyToken(_ bytes: Data, _ attributes: [String: ItemValue], client: ClientIdentity) throws
        -> PreparedKey
    {
        var item = attributes
        try EnclaveKeyRules.checkCreation(item)
        let token = try EnclaveKeyToken(decoding: bytes)
        let privateKey = try open(token, context: nil, interactionAllowed: false)
        // A set offered as one alternative was recorded when the key was made: stored now, the key
        // would be bound to the set enrolled now, which may be another.
        if token.accessControl?.constraint?.offersBiometryCurrentSet == true,
            token.biometryBinding != (try authentication.currentSetBinding())
        {
            throw KeychainError.authenticationFailed(
                "the enrolled biometry changed since the key was made: it cannot be stored under a new set")
        }
        // What the key was made under is its own: the add may repeat it, never change it.
        if let given = item["accc"], given != token.accessControl.map({ ItemValue.accessControl($0) }) {
            throw KeychainError.invalidParameter("an enclave key keeps the access control it was made with")
        }
        if let given = item["pdmn"], given != .string(token.protection.attributeValue) || token.accessControl != nil {
            throw KeychainError.invalidParameter("an enclave key keeps the protection it was made with")
        }
        if let accessControl = token.accessControl {
            item["accc"] = .accessControl(accessControl)
        } else {
            item["pdmn"] = .string(token.protection.attributeValue)
        }
        return try prepare(privateKey, publicKey: token.publicKey, attributes: item, client: client, answerAll: false)
    }

    private func makeEnclaveKey(_ dictionary: [String: ItemValue], client: ClientIdentity) throws -> ItemResult? {
        try EnclaveKeyRules.checkCreation(dictionary)
        var attributes = dictionary
        let permanent = attributes.removeValue(forKey: "perm").map { $0 != .bool(false) && $0 != .integer(0) } ?? true
        let publicKey: Data
        let privateKey: SecureBytes
        if let hardware = keybag.enclaveKeyHardware {
            // Made in the device root's hardware: what is kept is the key's object, which loads there alone.
            let made = try hardware.createKey()
            publicKey = made.publicKey
            privateKey = EnclaveKeyRules.hardwareRepresentation(made.keyObject)
        } else {
            let key = try EnclaveKeyRules.crypto { () throws(AsymmetricKey.Failure) in
                try AsymmetricKey.generate(.ec(.p256))
            }
            publicKey = try EnclaveKeyRules.crypto { () throws(AsymmetricKey.Failure) in try key.publicRepresentation()
            }
            privateKey = try EnclaveKeyRules.crypto { () throws(AsymmetricKey.Failure) in
                try key.externalRepresentation()
            }
        }
        if permanent {
            return try store(privateKey, publicKey: publicKey, attributes: attributes, client: client, answerAll: true)
        }
        return try token(for: privateKey, publicKey: publicKey, attributes: attributes, client: client)
    }

    /// Stores an enclave key as its item. The answer (what the attributes' return keys ask for, or with
    /// `answerAll` its attributes, data and persistent reference) gives, like every read, its public
    /// key as its data.
    /// An enclave key's item, sealed and ready to insert: its row, and what an add of it answers.
    struct PreparedKey {
        let row: StoredItem
        let record: ItemRecord
        let query: Query
    }

    private func store(
        _ privateKey: SecureBytes, publicKey: Data, attributes: [String: ItemValue], client: ClientIdentity,
        answerAll: Bool
    ) throws -> ItemResult? {
        try insert(
            try prepare(privateKey, publicKey: publicKey, attributes: attributes, client: client, answerAll: answerAll))
    }

    private func prepare(
        _ privateKey: SecureBytes, publicKey: Data, attributes: [String: ItemValue], client: ClientIdentity,
        answerAll: Bool
    ) throws -> PreparedKey {
        let wrapped = try keybag.wrapDeviceBound(privateKey, context: publicKey)
        var item = attributes
        for (name, value) in try EnclaveKeyRules.attributes(publicKey: publicKey) { item[name] = value }
        item["v_Data"] = .data(EnclaveKeyRules.blob(wrapping: wrapped))
        if answerAll { for name in ["r_Attributes", "r_Data", "r_PersistentRef"] { item[name] = .bool(true) } }
        let query = try Query.parse(item, for: .add)
        let (row, prepared) = try prepareAdd(query, client: client, enclavePublicKey: publicKey)
        var record = prepared
        record.secret = SecureBytes(copying: publicKey)
        return PreparedKey(row: row, record: record, query: query)
    }

    /// Inserts a prepared key in a transaction of its own, and answers as its add asked.
    private func insert(_ key: PreparedKey) throws -> ItemResult? {
        try itemTransaction { connection in try insertNew(key.row, store: ItemStore(connection: connection)) }
        guard key.query.returnsAnything else { return nil }
        return try ResultShape(query: key.query).result(for: [key.record])
    }

    /// An ephemeral key's token, made under the rules an item of these attributes would be added by:
    /// its class key must be available, and an access control bound to the enrolled biometry or the
    /// passcode needs them. An application password, which would have to be given at every use and
    /// stretched each time, is not supported.
    private func token(
        for privateKey: SecureBytes, publicKey: Data, attributes: [String: ItemValue], client: ClientIdentity
    ) throws -> ItemResult? {
        var probe = attributes
        for (name, value) in try EnclaveKeyRules.attributes(publicKey: publicKey) { probe[name] = value }
        let query = try Query.parse(probe, for: .add)
        let accessControl = query.accessControl
        if accessControl?.requiresApplicationPassword == true {
            throw KeychainError.unimplemented("an ephemeral enclave key cannot have an application password")
        }
        let protection = query.shared.protectionClass ?? .whenUnlocked
        let classKey = try keybag.classKey(for: protection)
        let factors = try authentication.factorsForNewItem(accessControl, context: query.authenticationContext)
        let binding =
            accessControl?.constraint?.offersBiometryCurrentSet == true ? try authentication.currentSetBinding() : nil
        let unwrapped = EnclaveKeyToken(
            publicKey: publicKey, protection: protection, accessControl: accessControl, biometryBinding: binding,
            salt: try Random.bytes(16))
        let context = EnclaveKeyToken.context(header: unwrapped.header)
        let contentKey = try (factors ?? SecretFactors()).contentKey(itemKey: classKey, salt: unwrapped.salt)
        let sealed = try AESGCM.seal(privateKey, key: contentKey, authenticating: context)
        let token = unwrapped.wrapping(try keybag.wrapDeviceBound(SecureBytes(copying: sealed), context: context))
        var answer = try EnclaveKeyRules.attributes(publicKey: publicKey)
        answer["perm"] = .integer(0)
        answer["pdmn"] = .string(protection.attributeValue)
        if let accessControl { answer["accc"] = .accessControl(accessControl) }
        for name in ["labl", "atag"] { answer[name] = attributes[name] }
        answer["v_Data"] = .data(publicKey)
        answer["toid"] = .data(token.encoded)
        return .dictionary(answer)
    }

    /// A token's private key: unwrapped by the root (a token this root did not make is errSecParam),
    /// then opened with its class key (locked: errSecInteractionNotAllowed) and the factors its access
    /// control binds it to (gone, or another set enrolled since: errSecItemNotFound, as for an item
    /// whose binding died). Nobody is asked here.
    private func open(_ token: EnclaveKeyToken, context: AuthenticationContextReference?, interactionAllowed: Bool)
        throws -> SecureBytes
    {
        let wrappingContext = EnclaveKeyToken.context(header: token.header)
        let sealed: SecureBytes
        do {
            sealed = try keybag.unwrapDeviceBound(token.wrapped, context: wrappingContext)
        } catch {
            throw KeychainError.invalidParameter("the enclave key's token was not made by this keychain")
        }
        let classKey: SecureBytes
        do {
            classKey = try keybag.classKey(for: token.protection)
        } catch KeybagError.classUnavailable {
            throw KeychainError(.itemNotFound, "the enclave key's protection class no longer exists")
        }
        var factors = SecretFactors()
        if let accessControl = token.accessControl, accessControl.guardsSecret {
            factors = try authentication.factors(
                for: accessControl, context: context, interactionAllowed: interactionAllowed)
        }
        do {
            let contentKey = try factors.contentKey(itemKey: classKey, salt: token.salt)
            return try AESGCM.openSecure(
                sealed.withUnsafeBytes { Data($0) }, key: contentKey, authenticating: wrappingContext)
        } catch {
            throw KeychainError(
                .itemNotFound,
                "the enclave key's binding is gone (a new biometry enrollment, the passcode removed, the keychain erased)"
            )
        }
    }

    private func use(_ dictionary: [String: ItemValue], operation: EnclaveKeyOperation, client: ClientIdentity)
        throws -> SecureBytes
    {
        var options = dictionary
        let token = options.removeValue(forKey: "toid")
        let query = try Query.parse(options, for: .copyMatching)
        let unlocked: EnclavePrivateKey
        if case .data(let bytes)? = token {
            unlocked = try unlockToken(bytes, query: query, client: client)
        } else {
            unlocked = try unlockItem(query, client: client)
        }
        let privateKey: AsymmetricKey
        switch unlocked {
        case .software(let key): privateKey = key
        case .hardware(let object): return try useInHardware(object, operation)
        }
        return try EnclaveKeyRules.crypto { () throws(AsymmetricKey.Failure) in
            switch operation {
            case .sign(let hash, let input, let data):
                return SecureBytes(copying: try privateKey.sign(data, .ecdsa(hash, input)))
            case .sharedSecret(let peerBytes):
                let peer = try AsymmetricKey.importing(peerBytes, kind: .ec, isPrivate: false)
                return try privateKey.sharedSecret(with: peer)
            }
        }
    }

    /// An operation with a key in the device root's hardware: the chip signs a digest (a message is
    /// hashed here first) or runs the ECDH step; the private key is never in this process.
    private func useInHardware(_ object: Data, _ operation: EnclaveKeyOperation) throws -> SecureBytes {
        guard let hardware = keybag.enclaveKeyHardware else {
            throw KeychainError.notAvailable("the enclave key is in a TPM that this keychain's root does not reach")
        }
        switch operation {
        case .sign(let hash, let input, let data):
            let digest = input == .message ? try Digest.hash(data, hash) : data
            guard (20...64).contains(digest.count) else {
                throw KeychainError.invalidParameter("a digest of \(digest.count) bytes cannot be signed")
            }
            let (r, s) = try hardware.sign(keyObject: object, digest: digest)
            func padded(_ value: Data) -> Data { Data(count: max(0, 32 - value.count)) + value.suffix(32) }
            guard let der = ECDSASignatureEncoding.der(fromRawRS: padded(r) + padded(s), coordinateSize: 32) else {
                throw KeychainError.internalError("the TPM's signature could not be encoded")
            }
            return SecureBytes(copying: der)
        case .sharedSecret(let peerBytes):
            // Checked on the curve here, so a bad point is errSecParam as in software.
            _ = try EnclaveKeyRules.crypto { () throws(AsymmetricKey.Failure) in
                try AsymmetricKey.importing(peerBytes, kind: .ec, isPrivate: false)
            }
            guard peerBytes.count == 65 else {
                throw KeychainError.invalidParameter("the peer's key is not an uncompressed P-256 point")
            }
            return try hardware.sharedSecret(keyObject: object, peer: peerBytes)
        }
    }

    /// A stored enclave key's private key, once its item is found with the caller's groups and its
    /// access control satisfied.
    private func unlockItem(_ query: Query, client: ClientIdentity) throws -> EnclavePrivateKey {
        guard query.persistentReference != nil, query.itemClass == .key else {
            throw KeychainError.invalidParameter("an enclave key is named by its item's persistent reference")
        }
        let groups = try client.groupsForReading(query.accessGroup)
        let access = ItemAccess(query: query, broker: authentication, client: client)
        let matches = try pool.withConnection { connection in
            var search = try ItemSearch(
                store: ItemStore(connection: connection), keybag: keybag, digests: digests(), itemClass: .key,
                query: query, groups: groups, access: access)
            search.enclaveKey = .wrappedPrivateKey
            return try search.run(limit: 1, needSecret: true)
        }
        guard let record = matches.first?.record else { throw KeychainError.itemNotFound }
        guard let publicKey = record.enclavePublicKey, let blob = record.secret else {
            throw KeychainError.invalidParameter("the key is not an enclave key")
        }
        return try EnclaveKeyRules.privateKey(
            try keybag.unwrapDeviceBound(
                try EnclaveKeyRules.wrappedKey(in: blob.withUnsafeBytes { Data($0) }), context: publicKey))
    }

    /// An ephemeral enclave key's private key, once its token opens (see `open`) and its access
    /// control is satisfied, asking the user as a read would.
    private func unlockToken(_ bytes: Data, query: Query, client: ClientIdentity) throws -> EnclavePrivateKey {
        let token = try EnclaveKeyToken(decoding: bytes)
        let context = query.authenticationContext
        let interactionAllowed = query.interactionAllowed && !query.skipItemsNeedingAuthentication
        let representation = try open(token, context: context, interactionAllowed: interactionAllowed)
        if let accessControl = token.accessControl {
            let reason = query.operationPrompt ?? context?.localizedReason ?? ""
            try authentication.authorize(
                accessControl, context: context, client: client, reason: reason,
                interactionAllowed: interactionAllowed, boundSet: token.biometryBinding)
        }
        // The keychain may have locked while the user was asked.
        guard authentication.isAvailable(token.protection) else {
            throw KeychainError.interactionNotAllowed("the keychain locked while the user was asked")
        }
        return try EnclaveKeyRules.privateKey(representation)
    }
}

/// An enclave key's private key, as the keychain holds it for one operation.
enum EnclavePrivateKey {
    /// A software key (the software root's enclave keys).
    case software(AsymmetricKey)
    /// The object of a key inside the device root's hardware, which alone can use it.
    case hardware(Data)
}

/// What an enclave key is made of and may be made with.
enum EnclaveKeyRules {
    private static let blobVersion: UInt8 = 1

    /// Refuses what an enclave key cannot be: another token, type or size, data of the caller's,
    /// synchronizable, or an access control without `privateKeyUsage`.
    static func checkCreation(_ dictionary: [String: ItemValue]) throws {
        guard dictionary["tkid"] == .string(enclaveTokenID) else {
            throw KeychainError.invalidParameter("kSecAttrTokenID must be kSecAttrTokenIDSecureEnclave")
        }
        if let itemClass = dictionary["class"], itemClass != .string("keys") {
            throw KeychainError.invalidParameter("an enclave key is a kSecClassKey item")
        }
        for name in ["v_Data", "v_Ref", "v_PersistentRef"] where dictionary[name] != nil {
            throw KeychainError.invalidParameter("an enclave key is made inside the keychain; \(name) cannot be given")
        }
        for (name, allowed) in [("type", 73), ("bsiz", 256), ("esiz", 256), ("kcls", 1)] {
            guard let given = dictionary[name] else { continue }
            guard given == .integer(Int64(allowed)) || given == .string("\(allowed)") else {
                throw KeychainError.invalidParameter("enclave keys are 256-bit elliptic-curve (P-256) private keys")
            }
        }
        if let sync = dictionary["sync"], sync != .bool(false), sync != .integer(0) {
            throw KeychainError.invalidParameter("an enclave key never leaves this device (kSecAttrSynchronizable)")
        }
        if case .accessControl(let accessControl)? = dictionary["accc"], !accessControl.isPrivateKeyUsage {
            throw KeychainError.invalidParameter(
                "an enclave key's access control must include kSecAccessControlPrivateKeyUsage")
        }
    }

    /// Apple's attributes of an enclave private key: what it is, and what it may and may not do.
    static func attributes(publicKey: Data) throws -> [String: ItemValue] {
        var values: [String: ItemValue] = [
            "class": .string("keys"), "tkid": .string(enclaveTokenID), "kcls": .integer(1), "type": .integer(73),
            "bsiz": .integer(256), "esiz": .integer(256), "klbl": .data(try Digest.sha1(publicKey)),
        ]
        let can = ["perm", "priv", "modi", "sens", "asen", "next", "sign", "decr", "drve"]
        let cannot = ["extr", "encr", "vrfy", "wrap", "unwp", "snrc", "vyrc"]
        for name in can { values[name] = .integer(1) }
        for name in cannot { values[name] = .integer(0) }
        return values
    }

    /// The item's secret: a version, then the private key as the device root wrapped it.
    static func blob(wrapping wrapped: Data) -> Data { Data([blobVersion]) + wrapped }

    static func wrappedKey(in blob: Data) throws -> Data {
        guard blob.first == blobVersion, blob.count > 1 else {
            throw KeychainError.internalError("an enclave key's stored form is not one this keychain makes")
        }
        return Data(blob.dropFirst())
    }

    /// What marks the representation of a key in hardware: its object follows (a software key's
    /// representation is DER, which starts with 0x30).
    private static let hardwareMagic = Data("SKHW".utf8)

    static func hardwareRepresentation(_ keyObject: Data) -> SecureBytes {
        SecureBytes(copying: hardwareMagic + keyObject)
    }

    /// The private key from its unwrapped representation (the bytes are wiped after): a software key,
    /// or the object of a key in the device root's hardware.
    static func privateKey(_ representation: SecureBytes) throws -> EnclavePrivateKey {
        var bytes = representation.withUnsafeBytes { Data($0) }
        defer { bytes.resetBytes(in: 0..<bytes.count) }
        if bytes.prefix(hardwareMagic.count) == hardwareMagic {
            return .hardware(Data(bytes.dropFirst(hardwareMagic.count)))
        }
        return .software(
            try crypto { () throws(AsymmetricKey.Failure) in
                try AsymmetricKey.importing(bytes, kind: .ec, isPrivate: true)
            })
    }

    /// Runs a key operation, its failures as the keychain's: bad input is errSecParam.
    static func crypto<T>(_ body: () throws(AsymmetricKey.Failure) -> T) throws -> T {
        do {
            return try body()
        } catch .invalidKey(let reason), .unsupported(let reason) {
            throw KeychainError.invalidParameter(reason)
        } catch .library(let reason) {
            throw KeychainError.internalError("OpenSSL: \(reason)")
        }
    }
}
