import FoundationEssentials

/// Bytes as lowercase hexadecimal and back. Decoding is checked: an odd length or a character that is
/// not a hex digit (either case) gives nil, never a guess.
public enum Hex {
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    public static func decode<Text: StringProtocol>(_ text: Text) -> Data? { decode(utf8: Array(text.utf8)) }

    /// Hex digits given as their UTF-8 bytes (a line of a file).
    public static func decode<Bytes: Collection>(utf8 text: Bytes) -> Data? where Bytes.Element == UInt8 {
        guard text.count % 2 == 0 else { return nil }
        var bytes = Data(capacity: text.count / 2)
        var high: UInt8?
        for character in text {
            guard let value = nibble(character) else { return nil }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
