import FoundationEssentials

/// Writes the length-prefixed little-endian records of the keychain's binary formats (keybag, sealed
/// item contents). Shared here, at the bottom layer, so every format reads back with the same checks.
public struct ByteWriter {
    // Bytes collect in an array, which appends cheaply, and become `Data` once, when asked for.
    private var bytes: [UInt8] = []
    /// Set once a secret is written: from then on the buffer grows by hand, so that the old one is
    /// wiped before it is freed (an array's own growth would free a copy of the secret unwiped).
    private var holdsSecret = false

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public var data: Data { Data(bytes) }

    public var count: Int { bytes.count }

    public mutating func write(_ value: UInt8) {
        makeRoom(for: 1)
        bytes.append(value)
    }

    public mutating func write(_ value: UInt16) {
        withUnsafeBytes(of: value.littleEndian) { append($0) }
    }

    public mutating func write(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { append($0) }
    }

    public mutating func write(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { append($0) }
    }

    public mutating func write(_ value: Int64) { write(UInt64(bitPattern: value)) }

    public mutating func write(_ value: Double) { write(value.bitPattern) }

    /// A byte string with a 32-bit length prefix.
    public mutating func writeBytes(_ value: Data) {
        write(UInt32(value.count))
        value.withUnsafeBytes { append($0) }
    }

    public mutating func writeBytes(_ value: [UInt8]) {
        write(UInt32(value.count))
        value.withUnsafeBytes { append($0) }
    }

    public mutating func writeBytes(_ value: UnsafeRawBufferPointer) {
        write(UInt32(value.count))
        append(value)
    }

    /// A secret with a 32-bit length prefix, as `writeBytes` writes it; from now on the writer's
    /// buffer is wiped whenever it grows.
    public mutating func writeSecretBytes(_ value: UnsafeRawBufferPointer) {
        holdsSecret = true
        writeBytes(value)
    }

    public mutating func writeString(_ string: String) {
        var string = string
        string.withUTF8 { writeBytes(UnsafeRawBufferPointer($0)) }
    }

    /// Raw bytes with no prefix (fixed-size fields).
    public mutating func writeRaw(_ value: Data) { value.withUnsafeBytes { append($0) } }

    private mutating func append(_ value: UnsafeRawBufferPointer) {
        makeRoom(for: value.count)
        bytes.append(contentsOf: value)
    }

    private mutating func makeRoom(for extra: Int) {
        guard holdsSecret, bytes.count + extra > bytes.capacity else { return }
        var larger: [UInt8] = []
        larger.reserveCapacity(max(bytes.capacity * 2, bytes.count + extra))
        larger.append(contentsOf: bytes)
        bytes.withUnsafeMutableBytes { SecureMemory.wipe($0) }
        bytes = larger
    }

    /// What was written, moved into wiped memory; this writer's own buffer is wiped and emptied.
    public mutating func takeSecure() -> SecureBytes {
        let secure = SecureBytes(copying: bytes)
        wipe()
        return secure
    }

    /// Overwrites every byte written with zeros (for buffers that held secrets), then empties it.
    public mutating func wipe() {
        bytes.withUnsafeMutableBytes { SecureMemory.wipe($0) }
        bytes.removeAll()
    }
}
