import FoundationEssentials
import KeychainCore

/// Coerces caller values to an attribute's kind, and gives the canonical bytes that digests and
/// comparisons use, so that equal values (by Apple's rules) always produce equal digests.
enum AttributeCodec {
    /// The value as stored for `descriptor`, or `.invalidParameter` when the type does not fit.
    static func normalize(_ value: ItemValue, for descriptor: AttributeDescriptor) throws -> ItemValue {
        switch (descriptor.kind, value) {
        case (.blob, .string), (.blob, .data), (.blob, .integer):
            return value
        case (.blob, .bool(let flag)):
            return .integer(flag ? 1 : 0)
        case (.data, .data):
            return value
        case (.data, .string(let string)):
            return .data(Data(string.utf8))
        case (.number, .integer):
            return value
        case (.number, .bool(let flag)):
            return .integer(flag ? 1 : 0)
        case (.number, .double(let number)):
            if number.rounded() == number, let integer = Int64(exactly: number) { return .integer(integer) }
            return value
        case (.number, .string(let string)):
            if let integer = Int64(string), String(integer) == string { return .integer(integer) }
            return value
        case (.date, .date):
            return value
        case (.string, .string):
            return value
        case (.attributeMap, .data(let bytes)):
            do {
                return .data(try SecretServiceAttributes(decoding: bytes).encoded)
            } catch {
                throw KeychainError.invalidParameter("\(descriptor.name) is not an attribute map: \(error.reason)")
            }
        case (.string, .data(let bytes)):
            guard let string = String(data: bytes, encoding: .utf8) else {
                throw KeychainError.invalidParameter("\(descriptor.name) must be a UTF-8 string")
            }
            return .string(string)
        default:
            throw KeychainError.invalidParameter("\(descriptor.name) does not take a value of type \(value.typeName)")
        }
    }

    /// Canonical bytes of a normalized value: what the keyed digests cover.
    static func canonicalBytes(_ value: ItemValue, kind: AttributeKind) -> Data {
        switch kind {
        case .blob, .data, .attributeMap:
            switch value {
            case .string(let string): return Data(string.utf8)
            case .data(let bytes): return bytes
            case .integer(let number): return Data(String(number).utf8)
            default: return tagged("?", value)
            }
        case .number, .date, .string:
            return tagged("", value)
        }
    }

    private static func tagged(_ prefix: String, _ value: ItemValue) -> Data {
        var bytes = Data(prefix.utf8)
        switch value {
        case .string(let string):
            bytes.append(UInt8(ascii: "s"))
            bytes.append(contentsOf: string.utf8)
        case .data(let data):
            bytes.append(UInt8(ascii: "b"))
            bytes.append(data)
        case .integer(let number):
            bytes.append(UInt8(ascii: "i"))
            withUnsafeBytes(of: number.littleEndian) { bytes.append(contentsOf: $0) }
        case .double(let number):
            bytes.append(UInt8(ascii: "d"))
            withUnsafeBytes(of: number.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        case .date(let date):
            bytes.append(UInt8(ascii: "t"))
            withUnsafeBytes(of: date.timeIntervalSinceReferenceDate.bitPattern.littleEndian) {
                bytes.append(contentsOf: $0)
            }
        case .bool(let flag):
            bytes.append(UInt8(ascii: "i"))
            withUnsafeBytes(of: Int64(flag ? 1 : 0).littleEndian) { bytes.append(contentsOf: $0) }
        default:
            bytes.append(UInt8(ascii: "?"))
        }
        return bytes
    }

    /// Whether a stored value equals a query value by the attribute's comparison rules.
    static func matches(_ stored: ItemValue, _ wanted: ItemValue, kind: AttributeKind) -> Bool {
        if kind == .attributeMap {
            guard case .data(let storedBytes) = stored, case .data(let wantedBytes) = wanted,
                let storedMap = try? SecretServiceAttributes(decoding: storedBytes),
                let wantedMap = try? SecretServiceAttributes(decoding: wantedBytes)
            else { return false }
            return storedMap.contains(wantedMap)
        }
        // Same type and value is the common case; only mixed types (a string query on data) need bytes.
        return stored == wanted || canonicalBytes(stored, kind: kind) == canonicalBytes(wanted, kind: kind)
    }

    /// Interprets a synchronizable value: a boolean, or `kSecAttrSynchronizableAny`.
    static func synchronizable(_ value: ItemValue) throws -> SynchronizableMatch {
        switch value {
        case .bool(let flag): return SynchronizableMatch(flag)
        case .integer(let number): return SynchronizableMatch(number != 0)
        case .double(let number): return SynchronizableMatch(number != 0)
        case .string("syna"): return .any
        case .string(let string):
            if let number = Int64(string) { return SynchronizableMatch(number != 0) }
            if string == "true" { return .yes }
            if string == "false" { return .no }
            throw KeychainError.invalidParameter("sync must be a boolean or kSecAttrSynchronizableAny")
        default:
            throw KeychainError.invalidParameter(
                "sync must be a boolean or kSecAttrSynchronizableAny, not \(value.typeName)")
        }
    }

    static func boolean(_ value: ItemValue, key: String) throws -> Bool {
        switch value {
        case .bool(let flag): return flag
        case .integer(let number): return number != 0
        default: throw KeychainError.invalidParameter("\(key) must be a boolean, not \(value.typeName)")
        }
    }
}
