/// D-Bus type signatures: splitting them into complete types, and the alignment each type starts at.
enum DBusSignature {
    /// The longest signature the specification allows.
    static let maximumLength = 255
    /// How deeply arrays and structures may nest (each 32 in the specification; together 64).
    static let maximumDepth = 64

    /// The complete types of `signature`, in order; throws when it is not a valid sequence of them.
    static func completeTypes(_ signature: String) throws(DBusError) -> [String] {
        let characters = Array(signature.utf8)
        guard characters.count <= maximumLength else {
            throw DBusError(.malformed, "a signature is longer than \(maximumLength) characters")
        }
        var types: [String] = []
        var index = 0
        while index < characters.count {
            let end = try endOfCompleteType(characters, from: index, depth: 0)
            types.append(String(decoding: characters[index..<end], as: UTF8.self))
            index = end
        }
        return types
    }

    /// The index just past the complete type that starts at `start`.
    private static func endOfCompleteType(_ characters: [UInt8], from start: Int, depth: Int) throws(DBusError) -> Int {
        guard depth <= maximumDepth else { throw DBusError(.malformed, "a signature nests too deeply") }
        guard start < characters.count else { throw DBusError(.malformed, "a signature ends inside a type") }
        switch characters[start] {
        case UInt8(ascii: "y"), UInt8(ascii: "b"), UInt8(ascii: "n"), UInt8(ascii: "q"), UInt8(ascii: "i"),
            UInt8(ascii: "u"), UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "s"),
            UInt8(ascii: "o"), UInt8(ascii: "g"), UInt8(ascii: "h"), UInt8(ascii: "v"):
            return start + 1
        case UInt8(ascii: "a"):
            let element = start + 1
            if element < characters.count, characters[element] == UInt8(ascii: "{") {
                // A dictionary entry: a basic key, one complete value type, and the closing brace.
                guard element + 1 < characters.count, isBasic(characters[element + 1]) else {
                    throw DBusError(.malformed, "a dictionary key is not of a basic type")
                }
                let valueEnd = try endOfCompleteType(characters, from: element + 2, depth: depth + 1)
                guard valueEnd < characters.count, characters[valueEnd] == UInt8(ascii: "}") else {
                    throw DBusError(.malformed, "a dictionary entry is not closed")
                }
                return valueEnd + 1
            }
            return try endOfCompleteType(characters, from: element, depth: depth + 1)
        case UInt8(ascii: "("):
            var index = start + 1
            guard index < characters.count, characters[index] != UInt8(ascii: ")") else {
                throw DBusError(.malformed, "an empty or unclosed structure in a signature")
            }
            while index < characters.count, characters[index] != UInt8(ascii: ")") {
                index = try endOfCompleteType(characters, from: index, depth: depth + 1)
            }
            guard index < characters.count else { throw DBusError(.malformed, "a structure is not closed") }
            return index + 1
        default:
            throw DBusError(.malformed, "an unknown type code \(characters[start]) in a signature")
        }
    }

    private static func isBasic(_ code: UInt8) -> Bool {
        Array("ybnqiuxtdsogh".utf8).contains(code)
    }

    /// The alignment of the type that starts with `code`.
    static func alignment(of code: UInt8?) -> Int {
        switch code {
        case UInt8(ascii: "n")?, UInt8(ascii: "q")?: 2
        case UInt8(ascii: "b")?, UInt8(ascii: "i")?, UInt8(ascii: "u")?, UInt8(ascii: "s")?, UInt8(ascii: "o")?,
            UInt8(ascii: "a")?, UInt8(ascii: "h")?:
            4
        case UInt8(ascii: "x")?, UInt8(ascii: "t")?, UInt8(ascii: "d")?, UInt8(ascii: "(")?, UInt8(ascii: "{")?: 8
        default: 1
        }
    }
}
