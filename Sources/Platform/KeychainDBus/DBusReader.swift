/// Decodes values from a whole message, checking every length, alignment and limit: bytes from the
/// bus never make it read out of bounds, loop without end or recurse without bound.
struct DBusReader {
    let bytes: [UInt8]
    let bigEndian: Bool
    /// The next byte to read, counted from the message's start (which alignment is relative to).
    var offset: Int

    mutating func skipPadding(to alignment: Int) throws(DBusError) {
        let aligned = (offset + alignment - 1) / alignment * alignment
        guard aligned <= bytes.count else { throw DBusError(.malformed, "a message ends inside padding") }
        guard bytes[offset..<aligned].allSatisfy({ $0 == 0 }) else {
            throw DBusError(.malformed, "padding that is not zero")
        }
        offset = aligned
    }

    mutating func integer<Integer: FixedWidthInteger>(_: Integer.Type) throws(DBusError) -> Integer {
        let size = MemoryLayout<Integer>.size
        try skipPadding(to: size)
        guard offset + size <= bytes.count else { throw DBusError(.malformed, "a message ends inside a number") }
        var value: Integer = 0
        for index in 0..<size {
            let byte = Integer(truncatingIfNeeded: bytes[offset + (bigEndian ? index : size - 1 - index)])
            value = value << 8 | byte
        }
        offset += size
        return value
    }

    /// Reads one value of the complete type `type` (see `DBusSignature.completeTypes`).
    mutating func read(_ type: Substring, depth: Int = 0) throws(DBusError) -> DBusValue {
        guard depth <= DBusSignature.maximumDepth else { throw DBusError(.malformed, "values nest too deeply") }
        guard let code = type.utf8.first else { throw DBusError(.malformed, "an empty type") }
        switch code {
        case UInt8(ascii: "y"):
            guard offset < bytes.count else { throw DBusError(.malformed, "a message ends inside a byte") }
            offset += 1
            return .byte(bytes[offset - 1])
        case UInt8(ascii: "b"):
            switch try integer(UInt32.self) {
            case 0: return .boolean(false)
            case 1: return .boolean(true)
            default: throw DBusError(.malformed, "a boolean that is neither 0 nor 1")
            }
        case UInt8(ascii: "n"): return .int16(try integer(Int16.self))
        case UInt8(ascii: "q"): return .uint16(try integer(UInt16.self))
        case UInt8(ascii: "i"): return .int32(try integer(Int32.self))
        case UInt8(ascii: "u"): return .uint32(try integer(UInt32.self))
        case UInt8(ascii: "h"): return .unixFD(try integer(UInt32.self))
        case UInt8(ascii: "x"): return .int64(try integer(Int64.self))
        case UInt8(ascii: "t"): return .uint64(try integer(UInt64.self))
        case UInt8(ascii: "d"): return .double(Double(bitPattern: try integer(UInt64.self)))
        case UInt8(ascii: "s"): return .string(try string(length: Int(try integer(UInt32.self))))
        case UInt8(ascii: "o"): return .objectPath(try string(length: Int(try integer(UInt32.self))))
        case UInt8(ascii: "g"): return .signature(try signatureText())
        case UInt8(ascii: "v"):
            let inner = try signatureText()
            let types = try DBusSignature.completeTypes(inner)
            guard types.count == 1 else { throw DBusError(.malformed, "a variant's signature is not one type") }
            return .variant(try read(Substring(types[0]), depth: depth + 1))
        case UInt8(ascii: "a"):
            let element = type.dropFirst()
            let length = Int(try integer(UInt32.self))
            guard length <= 1 << 26 else { throw DBusError(.malformed, "an array over 64 MiB") }
            try skipPadding(to: DBusSignature.alignment(of: element.utf8.first))
            let end = offset + length
            guard end <= bytes.count else { throw DBusError(.malformed, "an array longer than its message") }
            var items: [DBusValue] = []
            while offset < end {
                items.append(try read(element, depth: depth + 1))
            }
            guard offset == end else { throw DBusError(.malformed, "an array's elements overrun its length") }
            return .array(element: String(element), items)
        case UInt8(ascii: "("):
            try skipPadding(to: 8)
            let inside = String(type.dropFirst().dropLast())
            var fields: [DBusValue] = []
            for field in try DBusSignature.completeTypes(inside) {
                fields.append(try read(Substring(field), depth: depth + 1))
            }
            return .structure(fields)
        case UInt8(ascii: "{"):
            try skipPadding(to: 8)
            let inside = try DBusSignature.completeTypes(String(type.dropFirst().dropLast()))
            guard inside.count == 2 else { throw DBusError(.malformed, "a dictionary entry is not a key and a value") }
            let key = try read(Substring(inside[0]), depth: depth + 1)
            return .dictEntry(key: key, value: try read(Substring(inside[1]), depth: depth + 1))
        default:
            throw DBusError(.malformed, "an unknown type code \(code)")
        }
    }

    /// `length` bytes of UTF-8 and the nul after them.
    private mutating func string(length: Int) throws(DBusError) -> String {
        guard length < bytes.count, offset + length < bytes.count, bytes[offset + length] == 0 else {
            throw DBusError(.malformed, "a string runs past its message or is not terminated")
        }
        guard let text = String(validating: bytes[offset..<offset + length], as: UTF8.self), !text.utf8.contains(0)
        else { throw DBusError(.malformed, "a string that is not UTF-8") }
        offset += length + 1
        return text
    }

    private mutating func signatureText() throws(DBusError) -> String {
        guard offset < bytes.count else { throw DBusError(.malformed, "a message ends inside a signature") }
        let length = Int(bytes[offset])
        offset += 1
        return try string(length: length)
    }
}
