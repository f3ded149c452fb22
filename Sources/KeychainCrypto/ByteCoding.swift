import Foundation

/// Writes the length-prefixed little-endian records of the keychain's binary formats (keybag, sealed
/// item contents). Shared here, at the bottom layer, so every format reads back with the same checks.
public struct ByteWriter {
    public private(set) var data = Data()

    public init() {}

    public mutating func write(_ value: UInt8) { data.append(value) }

    public mutating func write(_ value: UInt16) {
        withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) }
    }

    public mutating func write(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) }
    }

    public mutating func write(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) }
    }

    public mutating func write(_ value: Int64) { write(UInt64(bitPattern: value)) }

    public mutating func write(_ value: Double) { write(value.bitPattern) }

    /// A byte string with a 32-bit length prefix.
    public mutating func writeBytes(_ bytes: Data) {
        write(UInt32(bytes.count))
        data.append(bytes)
    }

    public mutating func writeBytes(_ bytes: [UInt8]) {
        write(UInt32(bytes.count))
        data.append(contentsOf: bytes)
    }

    public mutating func writeString(_ string: String) { writeBytes(Array(string.utf8)) }

    /// Raw bytes with no prefix (fixed-size fields).
    public mutating func writeRaw(_ bytes: Data) { data.append(bytes) }
}

/// Reads what `ByteWriter` wrote. Every read checks bounds and throws `ByteReader.Truncated` rather than
/// trapping, because the bytes may come from a damaged or hostile file.
public struct ByteReader {
    public struct Truncated: Error, Equatable {
        public init() {}
    }

    private let data: Data
    private var offset: Int

    public init(_ data: Data) {
        self.data = data
        self.offset = data.startIndex
    }

    public var isAtEnd: Bool { offset == data.endIndex }
    public var remaining: Int { data.endIndex - offset }

    public mutating func readRaw(_ count: Int) throws(Truncated) -> Data {
        guard count >= 0, remaining >= count else { throw Truncated() }
        let slice = data[offset..<offset + count]
        offset += count
        return Data(slice)
    }

    public mutating func read() throws(Truncated) -> UInt8 {
        guard remaining >= 1 else { throw Truncated() }
        defer { offset += 1 }
        return data[offset]
    }

    private mutating func readInteger<T: FixedWidthInteger>(_: T.Type) throws(Truncated) -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw Truncated() }
        var value: T = 0
        for index in 0..<size { value |= T(data[offset + index]) << (8 * index) }
        offset += size
        return value
    }

    public mutating func read() throws(Truncated) -> UInt16 { try readInteger(UInt16.self) }
    public mutating func read() throws(Truncated) -> UInt32 { try readInteger(UInt32.self) }
    public mutating func read() throws(Truncated) -> UInt64 { try readInteger(UInt64.self) }
    public mutating func read() throws(Truncated) -> Int64 { Int64(bitPattern: try readInteger(UInt64.self)) }
    public mutating func read() throws(Truncated) -> Double { Double(bitPattern: try readInteger(UInt64.self)) }

    public mutating func readBytes() throws(Truncated) -> Data {
        let count: UInt32 = try read()
        return try readRaw(Int(count))
    }

    /// A UTF-8 string. Every format that stores strings is authenticated (AES-GCM or a MAC) before it
    /// is parsed, so the bytes are what this program wrote; ill-formed UTF-8 could only come from a bug
    /// and would be replaced with U+FFFD rather than trap.
    public mutating func readString() throws(Truncated) -> String {
        let count: UInt32 = try read()
        guard remaining >= Int(count) else { throw Truncated() }
        let start = offset
        offset += Int(count)
        let decoded = data.withUnsafeBytes { buffer -> String? in
            let base = buffer.baseAddress.map { $0 + (start - data.startIndex) }
            let bytes = UnsafeRawBufferPointer(start: base, count: Int(count))
            return String(decoding: bytes.bindMemory(to: UInt8.self), as: UTF8.self)
        }
        guard let decoded else { throw Truncated() }
        return decoded
    }
}
