#if canImport(Glibc)
    import Glibc
#endif

/// Wiping memory that held secrets.
public enum SecureMemory {
    /// Overwrites `buffer` with zeros in a way the optimiser cannot remove.
    public static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        explicit_bzero(base, buffer.count)
    }

    /// Wipes a byte array in place (its storage, not a copy).
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { wipe($0) }
    }
}
