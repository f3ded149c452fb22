import Foundation

/// The two encodings of an ECDSA signature: DER `Ecdsa-Sig-Value` (SEQUENCE of two INTEGERs, ANSI
/// X9.62) and r ‖ s, each big-endian and as long as the curve's coordinates (RFC 4754; what CryptoKit
/// calls the raw representation).
public enum ECDSASignatureEncoding {
    /// r ‖ s from DER; nil unless the DER is exactly one well-formed pair that fits the curve.
    public static func rawRS(fromDER der: Data, coordinateSize: Int) -> Data? {
        var reader = DERReader(Data(der))
        guard let sequence = reader.element(tag: 0x30), reader.isAtEnd else { return nil }
        var body = DERReader(sequence)
        guard let r = body.element(tag: 0x02), let s = body.element(tag: 0x02), body.isAtEnd else { return nil }
        guard let left = fixed(r, coordinateSize), let right = fixed(s, coordinateSize) else { return nil }
        return left + right
    }

    /// DER from r ‖ s; nil unless the input is two coordinates long.
    public static func der(fromRawRS raw: Data, coordinateSize: Int) -> Data? {
        guard raw.count == 2 * coordinateSize else { return nil }
        let bytes = [UInt8](raw)
        let body = integer(bytes[..<coordinateSize]) + integer(bytes[coordinateSize...])
        return Data([0x30] + length(body.count) + body)
    }

    /// A positive INTEGER's content at exactly `size` bytes (its sign byte dropped, zeros prepended).
    private static func fixed(_ content: Data, _ size: Int) -> Data? {
        var bytes = [UInt8](content)
        guard let first = bytes.first, first & 0x80 == 0 else { return nil }  // negative or empty
        while bytes.count > 1, bytes[0] == 0 { bytes.removeFirst() }
        guard bytes.count <= size else { return nil }
        return Data(repeating: 0, count: size - bytes.count) + bytes
    }

    private static func integer(_ value: ArraySlice<UInt8>) -> [UInt8] {
        var bytes = Array(value.drop { $0 == 0 })
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return [0x02] + length(bytes.count) + bytes
    }

    private static func length(_ count: Int) -> [UInt8] {
        count < 0x80
            ? [UInt8(count)] : count < 0x100 ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xff)]
    }
}

/// Definite-length DER elements of at most 64 KiB, read strictly (minimal lengths only).
private struct DERReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ data: Data) { bytes = [UInt8](data) }

    var isAtEnd: Bool { offset == bytes.count }

    /// The content of the next element if it has `tag`; nil (and nothing consumed) otherwise.
    mutating func element(tag: UInt8) -> Data? {
        var cursor = offset
        guard cursor + 2 <= bytes.count, bytes[cursor] == tag else { return nil }
        cursor += 1
        var count = Int(bytes[cursor])
        cursor += 1
        if count & 0x80 != 0 {
            let octets = count & 0x7f
            guard (1...2).contains(octets), cursor + octets <= bytes.count else { return nil }
            count = bytes[cursor..<cursor + octets].reduce(0) { $0 << 8 | Int($1) }
            cursor += octets
            // Minimal: a long form only for 128 and more, without a leading zero octet.
            guard count >= 0x80, octets == 1 || count >= 0x100 else { return nil }
        }
        guard count <= bytes.count - cursor else { return nil }
        offset = cursor + count
        return Data(bytes[cursor..<cursor + count])
    }
}
