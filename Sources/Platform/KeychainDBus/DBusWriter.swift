/// Encodes values little-endian, aligned from the start of what it writes (a message, or a body that
/// starts at a multiple of 8 in its message).
struct DBusWriter {
    private(set) var bytes: [UInt8] = []

    mutating func pad(to alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    mutating func append<Integer: FixedWidthInteger>(_ value: Integer) {
        pad(to: MemoryLayout<Integer>.size)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Overwrites the four bytes at `offset` (a length written before its contents were known).
    mutating func patch(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for (index, byte) in raw.enumerated() { bytes[offset + index] = byte }
        }
    }

    mutating func write(_ value: DBusValue) {
        switch value {
        case .byte(let byte): bytes.append(byte)
        case .boolean(let flag): append(UInt32(flag ? 1 : 0))
        case .int16(let number): append(number)
        case .uint16(let number): append(number)
        case .int32(let number): append(number)
        case .uint32(let number), .unixFD(let number): append(number)
        case .int64(let number): append(number)
        case .uint64(let number): append(number)
        case .double(let number): append(number.bitPattern)
        case .string(let text), .objectPath(let text):
            append(UInt32(text.utf8.count))
            bytes.append(contentsOf: text.utf8)
            bytes.append(0)
        case .signature(let text):
            bytes.append(UInt8(truncatingIfNeeded: text.utf8.count))
            bytes.append(contentsOf: text.utf8)
            bytes.append(0)
        case .array(let element, let items):
            append(UInt32(0))
            let lengthOffset = bytes.count - 4
            pad(to: DBusSignature.alignment(of: element.utf8.first))
            let start = bytes.count
            for item in items { write(item) }
            patch(UInt32(bytes.count - start), at: lengthOffset)
        case .structure(let fields):
            pad(to: 8)
            for field in fields { write(field) }
        case .dictEntry(let key, let entry):
            pad(to: 8)
            write(key)
            write(entry)
        case .variant(let inner):
            write(.signature(inner.signature))
            write(inner)
        }
    }
}
