import FoundationEssentials
import KeychainBytes
import KeychainCore

/// `kSecAttrSynchronizable` as a query states it: one value, or either (`kSecAttrSynchronizableAny`).
enum SynchronizableMatch: Sendable, Equatable {
    case no, yes, any

    init(_ flag: Bool) { self = flag ? .yes : .no }

    /// The row values it matches.
    var values: [Bool] {
        switch self {
        case .no: [false]
        case .yes: [true]
        case .any: [false, true]
        }
    }
}

/// The keys that a query, an add and an update share, parsed by one set of rules into typed values:
/// the secret, the access group, synchronizable, the protection class and the access control. Also the
/// rules every dictionary follows: at most `maximumKeys` keys, no null values.
struct SharedAttributes: Sendable {
    var secret: SecureBytes?
    var accessGroup: String?
    var synchronizable: SynchronizableMatch?
    var protection: ProtectionClass?
    var accessControl: AccessControlPolicy?

    /// Apple accepts at most this many keys in one dictionary.
    static let maximumKeys = 128

    /// Refuses a dictionary with too many keys; `name` says which dictionary, for the message.
    static func checkSize(_ dictionary: [String: ItemValue], name: String) throws {
        guard dictionary.count <= maximumKeys else {
            throw KeychainError.invalidParameter(
                "\(name) has \(dictionary.count) keys; at most \(maximumKeys) are allowed")
        }
    }

    static func checkNotNull(_ key: String, _ value: ItemValue) throws {
        if case .null = value { throw KeychainError.invalidParameter("the value for \(key) is null") }
    }

    /// Takes `key` if it is one of the shared keys, and says whether it was.
    mutating func take(_ key: String, _ value: ItemValue) throws -> Bool {
        switch key {
        case "v_Data":
            switch value {
            case .secret(let bytes): secret = bytes
            // Data given as plain bytes (the engine's own callers, an older client) is taken into wiped memory.
            case .data(let bytes): secret = SecureBytes(copying: bytes)
            default:
                throw KeychainError.invalidParameter("v_Data (kSecValueData) must be data, not \(value.typeName)")
            }
        case "agrp":
            guard case .string(let group) = value, !group.isEmpty else {
                throw KeychainError.invalidParameter("agrp (kSecAttrAccessGroup) must be a non-empty string")
            }
            accessGroup = group
        case "sync":
            synchronizable = try AttributeCodec.synchronizable(value)
        case "pdmn":
            guard case .string(let name) = value, let protectionClass = ProtectionClass(attributeValue: name) else {
                throw KeychainError.invalidParameter("pdmn (kSecAttrAccessible) is not a valid protection class")
            }
            protection = protectionClass
        case "accc":
            guard case .accessControl(let policy) = value else {
                throw KeychainError.invalidParameter(
                    "accc (kSecAttrAccessControl) must be a SecAccessControl, not \(value.typeName)")
            }
            if let problem = AccessControlPolicy.problem(withFlags: policy.flags) {
                throw KeychainError.invalidParameter("accc (kSecAttrAccessControl) is not valid: \(problem)")
            }
            accessControl = policy
        default:
            return false
        }
        return true
    }

    /// The rule on these keys together: never a protection class and an access control at once.
    func validate() throws {
        if protection != nil, accessControl != nil {
            throw KeychainError.invalidParameter("conflicting kSecAttrAccessible and kSecAttrAccessControl")
        }
    }

    /// For an item being written (added or updated): an access control with constraints is never
    /// synchronizable (a policy with no flags is only a protection class). `synchronizable` is the item's.
    func checkAccessControlForWriting(synchronizable: Bool?) throws {
        guard let accessControl, accessControl.flags != 0 else { return }
        if synchronizable == true {
            throw KeychainError.invalidParameter("an item with kSecAttrAccessControl cannot be synchronizable")
        }
    }

    /// The protection class these keys give an item: the access control's, else kSecAttrAccessible's.
    var protectionClass: ProtectionClass? { accessControl?.protection ?? protection }
}
