import COpenSSL
import FoundationEssentials

/// The cryptographically secure random source (OpenSSL's DRBG, seeded from the kernel).
public enum Random {
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard buffer.count > 0, let base = buffer.baseAddress else { return }
        guard libcrypto.RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1
        else { throw CryptoError.randomFailed }
    }

    /// Random bytes that are not secret (nonces, identifiers, salts).
    public static func bytes(_ count: Int) throws -> Data {
        var data = Data(count: count)
        try data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) throws in
            try fill(buffer)
        }
        return data
    }
}
