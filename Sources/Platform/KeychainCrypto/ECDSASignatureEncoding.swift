import COpenSSL
import FoundationEssentials

/// The two encodings of an ECDSA signature: DER `Ecdsa-Sig-Value` (SEQUENCE of two INTEGERs, ANSI
/// X9.62) and r ‖ s, each big-endian and as long as the curve's coordinates (RFC 4754; what CryptoKit
/// calls the raw representation). OpenSSL reads and writes the DER.
public enum ECDSASignatureEncoding {
    /// r ‖ s from DER; nil unless the DER is exactly one pair that fits the curve, in the one encoding
    /// DER allows for it (minimal lengths, minimal positive integers, nothing after it).
    public static func rawRS(fromDER der: Data, coordinateSize: Int) -> Data? {
        guard accepts(coordinateSize), !der.isEmpty, der.count <= largestDER(coordinateSize) else { return nil }
        let decoded: OpaquePointer? = der.withUnsafeBytes { raw in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            return libcrypto.d2i_ECDSA_SIG(nil, &cursor, raw.count)
        }
        libcrypto.ERR_clear_error()
        guard let decoded else { return nil }
        defer { libcrypto.ECDSA_SIG_free(decoded) }
        // The decoder takes some encodings DER does not (a length in long form where the short one
        // fits, bytes after the sequence); a signature read two ways would be malleable, so only one
        // that encodes back to exactly these bytes is one.
        guard encoded(decoded) == der else { return nil }
        var r: OpaquePointer?
        var s: OpaquePointer?
        libcrypto.ECDSA_SIG_get0(decoded, &r, &s)
        guard let r, let s, let size = Int32(exactly: coordinateSize) else { return nil }
        var raw = Data(count: 2 * coordinateSize)
        let fits = raw.withUnsafeMutableBytes { out -> Bool in
            guard let base = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
            // Each is written right-aligned at the coordinates' size; -1 when it is longer.
            return libcrypto.BN_bn2binpad(r, base, size) == size
                && libcrypto.BN_bn2binpad(s, base + coordinateSize, size) == size
        }
        return fits ? raw : nil
    }

    /// DER from r ‖ s; nil unless the input is two coordinates long.
    public static func der(fromRawRS raw: Data, coordinateSize: Int) -> Data? {
        guard accepts(coordinateSize), raw.count == 2 * coordinateSize, let size = Int32(exactly: coordinateSize)
        else { return nil }
        guard let signature = libcrypto.ECDSA_SIG_new() else { return nil }
        defer { libcrypto.ECDSA_SIG_free(signature) }
        let (r, s): (OpaquePointer?, OpaquePointer?) = raw.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return (nil, nil) }
            return (libcrypto.BN_bin2bn(base, size, nil), libcrypto.BN_bin2bn(base + coordinateSize, size, nil))
        }
        // The signature owns both numbers once set0 succeeds, and neither before.
        guard let r, let s, libcrypto.ECDSA_SIG_set0(signature, r, s) == 1 else {
            libcrypto.BN_free(r)
            libcrypto.BN_free(s)
            return nil
        }
        return encoded(signature)
    }

    /// Coordinates of any curve in use (P-521's are 66 bytes), and not so large that the size
    /// arithmetic here or OpenSSL's `int` lengths overflow.
    private static func accepts(_ coordinateSize: Int) -> Bool { (1...4096).contains(coordinateSize) }

    /// The longest DER of two integers of `coordinateSize` bytes: each with a sign byte and a header
    /// of up to four bytes, in a sequence whose header is as long.
    private static func largestDER(_ coordinateSize: Int) -> Int { 4 + 2 * (4 + coordinateSize + 1) }

    private static func encoded(_ signature: OpaquePointer) -> Data? {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = libcrypto.i2d_ECDSA_SIG(signature, &buffer)
        guard length > 0, let buffer else {
            libcrypto.ERR_clear_error()
            return nil
        }
        defer { libcrypto.CRYPTO_free(buffer, #fileID, #line) }
        return Data(bytes: buffer, count: Int(length))
    }
}
