import Foundation
import KeychainBytes

/// A value in a query or an item, independent of Foundation's bridged object types, so the same
/// request can be made in-process or carried to the daemon.
public enum ItemValue: Sendable, Hashable {
    case string(String)
    case data(Data)
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    case date(Date)
    case array([ItemValue])
    case accessControl(AccessControlPolicy)
    /// An authentication context (`LAContext`), by reference: the context itself stays with its process.
    case authenticationContext(AuthenticationContextReference)
    /// A Security object (`kSecValueRef`: a `SecKey`, `SecCertificate` or `SecIdentity`).
    case valueReference(ValueReference)
    /// `NSNull` or a nil that reached the dictionary.
    case null
    /// Any other object; the string names its type for the error message.
    case unsupported(String)

    /// A short description of the value's type for error messages; never the value itself, which may be secret.
    public var typeName: String {
        switch self {
        case .string: "string"
        case .data: "data"
        case .integer: "integer"
        case .double: "number"
        case .bool: "boolean"
        case .date: "date"
        case .array: "array"
        case .accessControl: "SecAccessControl"
        case .authenticationContext: "LAContext"
        case .valueReference(let reference): reference.kind.typeName
        case .null: "null"
        case .unsupported(let name): name
        }
    }
}

/// What `SecAccessControlCreateWithFlags` made: a protection class and constraint flags (Apple's bits).
public struct AccessControlPolicy: Sendable, Hashable {
    /// The protection class (`kSecAttrAccessible`).
    public var protection: ProtectionClass
    /// `SecAccessControlCreateFlags` raw value.
    public var flags: UInt

    public init(protection: ProtectionClass, flags: UInt) {
        self.protection = protection
        self.flags = flags
    }
}

/// A query's answer, before it is turned into Foundation objects.
public indirect enum ItemResult: Sendable, Equatable {
    case data(Data)
    case dictionary([String: ItemValue])
    case array([ItemResult])
}

/// Names an authentication context (`LAContext`) across the service boundary, with what the context
/// says of itself: the service keeps what was evaluated under the identifier (so an evaluated context
/// satisfies later calls that name it), and never takes the client's word that anything was.
public struct AuthenticationContextReference: Sendable, Hashable {
    public let identifier: UUID
    /// `LAContext.interactionNotAllowed`: evaluating must not ask the user.
    public var interactionNotAllowed: Bool
    /// `LAContext.setCredential(_:type: .applicationPassword)`, if set.
    public var applicationPassword: SecureBytes?
    /// `LAContext.localizedReason`, shown by a prompt when a call gives no `kSecUseOperationPrompt`.
    public var localizedReason: String?

    public init(
        identifier: UUID = UUID(), interactionNotAllowed: Bool = false, applicationPassword: SecureBytes? = nil,
        localizedReason: String? = nil
    ) {
        self.identifier = identifier
        self.interactionNotAllowed = interactionNotAllowed
        self.applicationPassword = applicationPassword
        self.localizedReason = localizedReason
    }

    // A context is its identifier: what it carries changes as the app sets it up.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.identifier == rhs.identifier }

    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
}

/// A Security object given as `kSecValueRef` or asked for with `kSecReturnRef`: its kind, and what
/// identifies it in the keychain once stored (its persistent reference), if it is stored.
public struct ValueReference: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case key, certificate, identity

        public var typeName: String {
            switch self {
            case .key: "SecKey"
            case .certificate: "SecCertificate"
            case .identity: "SecIdentity"
            }
        }
    }

    public var kind: Kind
    public var persistentReference: Data?

    public init(kind: Kind, persistentReference: Data? = nil) {
        self.kind = kind
        self.persistentReference = persistentReference
    }
}
