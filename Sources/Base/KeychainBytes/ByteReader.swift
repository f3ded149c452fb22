import FoundationEssentials

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
        let start = offset - data.startIndex
        offset += size
        return T(littleEndian: data.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: start, as: T.self) })
    }

    /// A length-prefixed string that must be valid UTF-8: nil when it is not (the bytes are consumed).
    public mutating func readValidString() throws(Truncated) -> String? {
        let count: UInt32 = try read()
        guard remaining >= Int(count) else { throw Truncated() }
        let start = offset - data.startIndex
        offset += Int(count)
        return data.withUnsafeBytes { buffer in
            String(validating: UnsafeRawBufferPointer(rebasing: buffer[start..<start + Int(count)]), as: UTF8.self)
        }
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

    /// What `readBytes` reads, copied straight into wiped memory (no plain copy is made).
    public mutating func readSecureBytes() throws(Truncated) -> SecureBytes {
        let count = Int(try read() as UInt32)
        guard remaining >= count else { throw Truncated() }
        defer { offset += count }
        return SecureBytes(copying: data[offset..<offset + count])
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
