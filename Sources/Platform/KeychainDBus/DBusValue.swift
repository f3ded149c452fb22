import FoundationEssentials

/// A value in D-Bus's wire format, with the type it travels as. Only what the daemon needs from the
/// system bus (logind's session signals and properties) is used, but every type decodes, so that a
/// message of any shape can be read and skipped.
public indirect enum DBusValue: Equatable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// A descriptor passed with the message (received only by a connection that accepts them; never
    /// sent).
    case unixFD(DBusDescriptor)
    /// An array of bytes (`ay`), read and written whole.
    case bytes(Data)
    /// An array, with the signature of its elements (an empty array still has one). Arrays of bytes
    /// are `bytes`, never this.
    case array(element: String, [DBusValue])
    case structure([DBusValue])
    /// An entry of a dictionary: an array of these is a dictionary.
    case dictEntry(key: DBusValue, value: DBusValue)
    case variant(DBusValue)

    /// The value's type as a D-Bus signature.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .bytes: "ay"
        case .array(let element, _): "a" + element
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .dictEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .variant: "v"
        }
    }

    /// The string of a `string` or `objectPath`, else nil.
    public var text: String? {
        switch self {
        case .string(let text), .objectPath(let text): text
        default: nil
        }
    }

    /// The bytes of a `bytes` value, else nil.
    public var data: Data? {
        if case .bytes(let data) = self { return data }
        return nil
    }

    /// The entries of a dictionary (`a{…}`) whose keys are strings, else nil.
    public var stringDictionary: [String: DBusValue]? {
        guard case .array(_, let entries) = self else { return nil }
        var dictionary: [String: DBusValue] = [:]
        for entry in entries {
            guard case .dictEntry(.string(let key), let value) = entry else { return nil }
            dictionary[key] = value
        }
        return dictionary
    }
}
