import Foundation

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
    /// An authentication context object (`LAContext`); it carries no value the engine reads yet.
    case authenticationContext
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
        case .null: "null"
        case .unsupported(let name): name
        }
    }
}

/// What `SecAccessControlCreateWithFlags` made: a protection class and constraint flags (Apple's bits).
public struct AccessControlPolicy: Sendable, Hashable {
    /// The `kSecAttrAccessible` value (`ak`, `aku`, ...).
    public var protection: String
    /// `SecAccessControlCreateFlags` raw value.
    public var flags: UInt

    public init(protection: String, flags: UInt) {
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
