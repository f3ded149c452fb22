import FoundationEssentials
import KeychainBytes

/// A value in a query or an item, independent of Foundation's bridged object types, so the same
/// request can be made in-process or carried to the daemon.
public enum ItemValue: Sendable, Hashable {
    /// A string (a `CFString`, or a kSec constant).
    case string(String)
    /// Bytes (`CFData`): a secret, a persistent reference, a key's tag.
    case data(Data)
    /// Bytes as sensitive as a password (`kSecValueData`, a key's material): wiped when released,
    /// from the facade to the seal and back, in this process and the daemon's.
    case secret(SecureBytes)
    /// An integer `CFNumber`.
    case integer(Int64)
    /// A floating-point `CFNumber`, kept apart from integers as Foundation's type code tells them.
    case double(Double)
    /// A `CFBoolean`, kept apart from the numbers 0 and 1 as Foundation's type code tells them.
    case bool(Bool)
    /// A `CFDate`.
    case date(Date)
    /// A `CFArray` of values (`kSecMatchItemList` and the like).
    case array([ItemValue])
    /// A `SecAccessControl` (`kSecAttrAccessControl`), as its protection class and flags.
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
        case .data, .secret: "data"
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

    /// A policy as given; whether the flags are valid is `problem(withFlags:)`'s to say.
    public init(protection: ProtectionClass, flags: UInt) {
        self.protection = protection
        self.flags = flags
    }
}

extension ItemValue {
    /// Values are equal as the API sees them: data and a secret with the same bytes are the same
    /// `kSecValueData` (compared in constant time when a secret is involved).
    public static func == (lhs: ItemValue, rhs: ItemValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): a == b
        case (.data(let a), .data(let b)): a == b
        case (.secret(let a), .secret(let b)): a == b
        case (.data(let a), .secret(let b)), (.secret(let b), .data(let a)): b == SecureBytes(copying: a)
        case (.integer(let a), .integer(let b)): a == b
        case (.double(let a), .double(let b)): a == b
        case (.bool(let a), .bool(let b)): a == b
        case (.date(let a), .date(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.accessControl(let a), .accessControl(let b)): a == b
        case (.authenticationContext(let a), .authenticationContext(let b)): a == b
        case (.valueReference(let a), .valueReference(let b)): a == b
        case (.null, .null): true
        case (.unsupported(let a), .unsupported(let b)): a == b
        default: false
        }
    }

    /// Agrees with `==`: each case hashes its number first (data and a secret share one, being equal
    /// with the same bytes), then its contents; bytes, secret or not, by their length alone, so that
    /// no secret goes into a hash.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let value):
            hasher.combine(1)
            hasher.combine(value)
        case .data(let value):
            hasher.combine(2)
            hasher.combine(value.count)
        case .secret(let value):
            hasher.combine(2)
            hasher.combine(value.count)
        case .integer(let value):
            hasher.combine(3)
            hasher.combine(value)
        case .double(let value):
            hasher.combine(4)
            hasher.combine(value)
        case .bool(let value):
            hasher.combine(5)
            hasher.combine(value)
        case .date(let value):
            hasher.combine(6)
            hasher.combine(value)
        case .array(let values):
            hasher.combine(7)
            hasher.combine(values)
        case .accessControl(let value):
            hasher.combine(8)
            hasher.combine(value)
        case .authenticationContext(let value):
            hasher.combine(9)
            hasher.combine(value)
        case .valueReference(let value):
            hasher.combine(10)
            hasher.combine(value)
        case .null: hasher.combine(0)
        case .unsupported(let name):
            hasher.combine(11)
            hasher.combine(name)
        }
    }

    /// The bytes of a `.data` or `.secret` value (a copy, for a secret: the caller owns it then).
    public var bytes: Data? {
        switch self {
        case .data(let data): data
        case .secret(let secret): secret.withUnsafeBytes { Data($0) }
        default: nil
        }
    }

    /// The bytes of a `.data` or `.secret` value lent to `body`, a secret's viewed where they are, in
    /// wiped memory, with no copy made (so the `Data` must not escape `body`); nil for other values.
    public func withBorrowedBytes<R>(_ body: (Data) throws -> R) rethrows -> R? {
        switch self {
        case .data(let data): return try body(data)
        case .secret(let secret): return try secret.withBorrowedData(body)
        default: return nil
        }
    }
}

/// A query's answer, before it is turned into Foundation objects.
public indirect enum ItemResult: Sendable, Equatable {
    /// The secret alone (`kSecReturnData`), or a persistent reference alone.
    case data(Data)
    /// An item's data (`kSecReturnData` alone), kept wiped until the facade hands it to the app.
    case secret(SecureBytes)
    /// An item's attributes, with its data or reference when those were asked for too.
    case dictionary([String: ItemValue])
    /// One result per item matched, when the match limit asks for a list (`kSecMatchLimitAll`, or a
    /// number other than 1).
    case array([ItemResult])

    /// Data and a secret with the same bytes are the same answer, as the API sees it.
    public static func == (lhs: ItemResult, rhs: ItemResult) -> Bool {
        switch (lhs, rhs) {
        case (.data(let a), .data(let b)): a == b
        case (.secret(let a), .secret(let b)): a == b
        case (.data(let a), .secret(let b)), (.secret(let b), .data(let a)): b == SecureBytes(copying: a)
        case (.dictionary(let a), .dictionary(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        default: false
        }
    }

    /// The bytes of a `.data` or `.secret` answer (a copy, for a secret).
    public var bytes: Data? {
        switch self {
        case .data(let data): data
        case .secret(let secret): secret.withUnsafeBytes { Data($0) }
        default: nil
        }
    }
}

/// Names an authentication context (`LAContext`) across the service boundary, with what the context
/// says of itself: the service keeps what was evaluated under the identifier (so an evaluated context
/// satisfies later calls that name it), and never takes the client's word that anything was.
public struct AuthenticationContextReference: Sendable, Hashable {
    /// Names the context (`LAContext`'s own, for its life); what the service keeps is keyed by it and
    /// by the calling process.
    public let identifier: UUID
    /// `LAContext.interactionNotAllowed`: evaluating must not ask the user.
    public var interactionNotAllowed: Bool
    /// `LAContext.setCredential(_:type: .applicationPassword)`, if set.
    public var applicationPassword: SecureBytes?
    /// `LAContext.localizedReason`, shown by a prompt when a call gives no `kSecUseOperationPrompt`.
    public var localizedReason: String?

    /// A reference to a context; a new identifier by default, which names nothing evaluated yet.
    public init(
        identifier: UUID = UUID(), interactionNotAllowed: Bool = false, applicationPassword: SecureBytes? = nil,
        localizedReason: String? = nil
    ) {
        self.identifier = identifier
        self.interactionNotAllowed = interactionNotAllowed
        self.applicationPassword = applicationPassword
        self.localizedReason = localizedReason
    }

    /// Compares identifiers only: a context is its identifier, and what it carries changes as the app
    /// sets it up.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.identifier == rhs.identifier }

    /// Hashes the identifier only, as `==` compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
}

/// A Security object given as `kSecValueRef` or asked for with `kSecReturnRef`: its kind, and what
/// identifies it in the keychain once stored (its persistent reference), if it is stored.
public struct ValueReference: Sendable, Hashable {
    /// Which Security class the object is; the raw value is its name in the encoding.
    public enum Kind: String, Sendable, Hashable {
        /// A `SecKey`.
        case key
        /// A `SecCertificate`.
        case certificate
        /// A `SecIdentity`: a certificate and its private key.
        case identity

        /// The Security class's name, for error messages.
        public var typeName: String {
            switch self {
            case .key: "SecKey"
            case .certificate: "SecCertificate"
            case .identity: "SecIdentity"
            }
        }
    }

    /// Which kind of object it is.
    public var kind: Kind
    /// The stored item the object stands for (`kSecValuePersistentRef`); nil for one not in the keychain.
    public var persistentReference: Data?

    /// A reference to an object of `kind`, stored or not.
    public init(kind: Kind, persistentReference: Data? = nil) {
        self.kind = kind
        self.persistentReference = persistentReference
    }
}
