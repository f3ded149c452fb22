import FoundationEssentials
import KeychainBytes
import KeychainKeybag

/// The four SecItem operations; parsing rules differ slightly between them.
enum ItemOperation: Sendable {
    case add, copyMatching, update, delete
}

enum MatchLimit: Equatable, Sendable {
    case one
    case all
    case count(Int)

    /// Whether results come back as an array.
    var returnsArray: Bool {
        switch self {
        case .one: false
        case .all: true
        case .count(let count): count != 1
        }
    }

    var maximum: Int {
        switch self {
        case .one: 1
        case .all: Int.max
        case .count(let count): count
        }
    }
}

/// A 20-byte persistent reference: 4 ASCII bytes of class ‖ the item's 16-byte identity.
struct PersistentReference: Equatable, Sendable {
    static let size = 20

    var itemClass: ItemClass
    var identity: Data

    init(itemClass: ItemClass, identity: Data) {
        self.itemClass = itemClass
        self.identity = identity
    }

    init?(_ bytes: Data) {
        guard bytes.count == Self.size,
            let name = String(data: bytes.prefix(4), encoding: .ascii),
            let itemClass = ItemClass(name: name)
        else { return nil }
        self.itemClass = itemClass
        self.identity = Data(bytes.suffix(16))
    }

    var bytes: Data { Data(itemClass.name.utf8) + identity }
}

/// A query dictionary after validation: every key understood, every value of the right type.
struct Query: Sendable {
    var itemClass: ItemClass?
    /// True for `kSecClassIdentity`, which has no table of its own.
    var isIdentity = false
    /// Class attributes to match or set, normalized, without the engine-managed ones below.
    var attributes: [String: ItemValue] = [:]
    /// The secret, access group, synchronizable, protection class and access control.
    var shared = SharedAttributes()
    var musr: ItemValue?
    var tombstone: Bool?
    var useTombstones: Bool?
    var limit: MatchLimit = .one
    var limitGiven = false
    var returnData = false
    var returnAttributes = false
    var returnReference = false
    var returnPersistentReference = false
    var persistentReference: PersistentReference?
    /// The Security object given as `kSecValueRef`.
    var valueReference: ValueReference?
    /// An authentication context given as `kSecUseAuthenticationContext`.
    var authenticationContext: AuthenticationContextReference?
    var skipItemsNeedingAuthentication = false
    /// False when the query forbids asking the user (`kSecUseAuthenticationUIFail`, `kSecUseNoAuthenticationUI`).
    var interactionAllowed = true
    /// `kSecUseOperationPrompt`: the reason a prompt shows.
    var operationPrompt: String?

    var accessGroup: String? { shared.accessGroup }
    var synchronizable: SynchronizableMatch? { shared.synchronizable }
    var protection: ProtectionClass? { shared.protection }
    var accessControl: AccessControlPolicy? { shared.accessControl }
    var valueData: SecureBytes? { shared.secret }

    var returnsAnything: Bool { returnData || returnAttributes || returnReference || returnPersistentReference }

    static func parse(_ dictionary: [String: ItemValue], for operation: ItemOperation) throws -> Query {
        try SharedAttributes.checkSize(dictionary, name: "the query")
        var query = Query()
        if let classValue = dictionary["class"] {
            guard case .string(let name) = classValue else {
                throw KeychainError.invalidParameter("class must be a string, not \(classValue.typeName)")
            }
            if name == ItemClass.identityName {
                query.isIdentity = true
            } else if let itemClass = ItemClass(name: name) {
                query.itemClass = itemClass
            } else {
                throw KeychainError.noSuchClass("unknown item class \"\(name)\"")
            }
        }
        let classOnly = query
        do {
            for (key, value) in dictionary where key != "class" { try query.take(key, value, operation: operation) }
        } catch {
            // Report the first problem in key order, so that which one is reported does not depend on
            // hashing: walking sorted keys costs, so only a query that has one pays it.
            var sorted = classOnly
            for key in dictionary.keys.sorted() where key != "class" {
                if let value = dictionary[key] { try sorted.take(key, value, operation: operation) }
            }
            throw error
        }
        if query.itemClass == nil, !query.isIdentity {
            if let reference = query.persistentReference {
                query.itemClass = reference.itemClass
            } else {
                throw KeychainError.invalidParameter("the query has no class (kSecClass)")
            }
        }
        try query.validateCombinations(operation)
        return query
    }

    private mutating func take(_ key: String, _ value: ItemValue, operation: ItemOperation) throws {
        try SharedAttributes.checkNotNull(key, value)
        if try shared.take(key, value) { return }
        try apply(key: key, value: value, operation: operation)
    }

    private mutating func apply(key: String, value: ItemValue, operation: ItemOperation) throws {
        if key.utf8.count == 4 {
            try applyAttribute(key: key, value: value)
            return
        }
        switch key.first {
        case "m": try applyMatch(key: key, value: value)
        case "r": try applyReturn(key: key, value: value)
        case "u": try applyUse(key: key, value: value, operation: operation)
        case "v": try applyValue(key: key, value: value)
        case "f": break  // internal callbacks in Apple's API; nothing to do here
        default: throw KeychainError.invalidParameter("unknown key \"\(key)\"")
        }
    }

    private mutating func applyAttribute(key: String, value: ItemValue) throws {
        switch key {
        case "nleg":
            return  // kSecUseDataProtectionKeychain: this keychain is always the data-protection one
        case "tomb":
            tombstone = try AttributeCodec.boolean(value, key: "tomb")
            return
        case "musr":
            // Apple's multi-user partition: always the empty one here.
            guard case .data = value else { throw KeychainError.invalidParameter("musr must be data") }
            musr = value
            return
        default:
            break
        }
        guard let itemClass else {
            if isIdentity {
                // Identity queries may use certificate and key attributes.
                for candidate in [ItemClass.certificate, .key] {
                    if let descriptor = AttributeSchema.descriptor(key, in: candidate) {
                        attributes[key] = try AttributeCodec.normalize(value, for: descriptor)
                        return
                    }
                }
                throw KeychainError.noSuchAttribute("\(key) is not an attribute of identities")
            }
            // Only a persistent-reference query has no class; it may not name attributes.
            throw KeychainError.invalidParameter("attribute \(key) given without a class")
        }
        guard let descriptor = AttributeSchema.descriptor(key, in: itemClass) else {
            throw KeychainError.noSuchAttribute("\(key) is not an attribute of class \(itemClass.name)")
        }
        attributes[key] = try AttributeCodec.normalize(value, for: descriptor)
    }

    private mutating func applyMatch(key: String, value: ItemValue) throws {
        switch key {
        case "m_Limit":
            limitGiven = true
            switch value {
            case .string("m_LimitOne"): limit = .one
            case .string("m_LimitAll"): limit = .all
            case .integer(let count) where count > 0: limit = .count(Int(count))
            case .double(let number) where number >= 1:
                guard let count = Int(exactly: number) else { fallthrough }
                limit = .count(count)
            default:
                throw KeychainError.invalidParameter(
                    "m_Limit must be kSecMatchLimitOne, kSecMatchLimitAll or a positive number")
            }
        case "m_CaseInsensitive", "m_ItemList", "m_SearchList":
            // Honoured only by macOS's file keychain; the data-protection keychain ignores them.
            break
        case "m_Policy", "m_Issuers", "m_EmailAddressIfPresent", "m_SubjectContains", "m_TrustedOnly",
            "m_ValidOnDate", "m_HostOrSubdomainOfHost":
            throw KeychainError.unimplemented("\(key) is not supported")
        default:
            throw KeychainError.invalidParameter("unknown match key \"\(key)\"")
        }
    }

    private mutating func applyReturn(key: String, value: ItemValue) throws {
        guard case .bool(let flag) = value else {
            throw KeychainError.invalidParameter(
                "\(key) must be a boolean (kCFBooleanTrue or true), not \(value.typeName)")
        }
        switch key {
        case "r_Data": returnData = flag
        case "r_Attributes": returnAttributes = flag
        case "r_Ref": returnReference = flag
        case "r_PersistentRef": returnPersistentReference = flag
        default: throw KeychainError.invalidParameter("unknown return key \"\(key)\"")
        }
    }

    private mutating func applyUse(key: String, value: ItemValue, operation: ItemOperation) throws {
        switch key {
        case "u_Tomb":
            useTombstones = try AttributeCodec.boolean(value, key: key)
        case "u_AuthUI":
            switch value {
            case .string("u_AuthUIA"): break
            case .string("u_AuthUIF"): interactionAllowed = false
            case .string("u_AuthUIS"):
                guard operation == .copyMatching else {
                    throw KeychainError.invalidParameter(
                        "kSecUseAuthenticationUISkip is allowed only in SecItemCopyMatching")
                }
                skipItemsNeedingAuthentication = true
            default:
                throw KeychainError.invalidParameter("u_AuthUI must be one of the kSecUseAuthenticationUI values")
            }
        case "u_NoAuthUI":
            if try AttributeCodec.boolean(value, key: key) { interactionAllowed = false }
        case "u_AuthCtx":
            guard case .authenticationContext(let context) = value else {
                throw KeychainError.invalidParameter("u_AuthCtx must be an LAContext, not \(value.typeName)")
            }
            authenticationContext = context
        case "u_OpPrompt":
            guard case .string(let prompt) = value else {
                throw KeychainError.invalidParameter("u_OpPrompt must be a string")
            }
            operationPrompt = prompt
        case "u_CredRef":
            guard case .data = value else { throw KeychainError.invalidParameter("u_CredRef must be data") }
        case "u_ItemList":
            if operation == .copyMatching || operation == .update {
                throw KeychainError.invalidParameter("kSecUseItemList is not supported")
            }
        case "u_SystemKeychainAlways", "u_SystemKeychain", "u_SyncBubbleKeychain", "u_CallerName",
            "u_TokenRawItems", "u_CertWithIssuers", "u_UserIndependentKeychain":
            break  // private switches of Apple's daemon with no meaning here
        default:
            throw KeychainError.invalidParameter("unknown use key \"\(key)\"")
        }
    }

    private mutating func applyValue(key: String, value: ItemValue) throws {
        switch key {
        case "v_PersistentRef":
            guard case .data(let bytes) = value else {
                throw KeychainError.invalidParameter("v_PersistentRef must be data, not \(value.typeName)")
            }
            guard let reference = PersistentReference(bytes) else {
                throw KeychainError.invalidParameter("v_PersistentRef is not a persistent reference of this keychain")
            }
            persistentReference = reference
        case "v_Ref":
            guard case .valueReference(let reference) = value else {
                throw KeychainError.invalidParameter("v_Ref must be a SecKey, SecCertificate or SecIdentity")
            }
            valueReference = reference
        default:
            throw KeychainError.invalidParameter("unknown value key \"\(key)\"")
        }
    }

    private func validateCombinations(_ operation: ItemOperation) throws {
        try shared.validate()
        if let persistentReference {
            if let itemClass, itemClass != persistentReference.itemClass, operation != .copyMatching {
                throw KeychainError.invalidParameter("the persistent reference names another class")
            }
            if !attributes.isEmpty || accessGroup != nil || protection != nil {
                throw KeychainError.invalidParameter("a persistent reference cannot be combined with attributes")
            }
        }
    }
}
