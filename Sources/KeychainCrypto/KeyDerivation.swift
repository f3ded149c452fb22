import COpenSSL
import Foundation

/// Key derivation: PBKDF2 for passcodes (the deliberately slow step) and HKDF for splitting one key into
/// several independent ones (the cheap step).
public enum KeyDerivation {
    /// PBKDF2-HMAC-SHA256 of `password` into `length` bytes.
    public static func pbkdf2(password: SecureBytes, salt: Data, iterations: Int, length: Int = 32)
        throws -> SecureBytes
    {
        try SecureBytes(count: length) { (out: UnsafeMutableRawBufferPointer) throws in
            let ok = password.withUnsafeBytes { passwordBytes in
                salt.withUnsafeBytes { saltBytes in
                    PKCS5_PBKDF2_HMAC(
                        passwordBytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(passwordBytes.count),
                        saltBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(saltBytes.count),
                        Int32(clamping: iterations), EVP_sha256(), Int32(length),
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self))
                }
            }
            guard ok == 1 else { throw CryptoError.libraryFailure("PKCS5_PBKDF2_HMAC") }
        }
    }

    /// HKDF-SHA256 (RFC 5869) with an empty salt: `info` separates the purposes of the derived keys.
    public static func hkdf(key: SecureBytes, info: String, length: Int = 32) throws -> SecureBytes {
        guard length <= 255 * 32 else { throw CryptoError.libraryFailure("HKDF output longer than 8160 bytes") }
        // Extract with the all-zero salt, then expand.
        let pseudoRandomKey = try SecureBytes(count: 32) { (out: UnsafeMutableRawBufferPointer) throws in
            let extractor = try HMACKey(key: SecureBytes(copying: [UInt8](repeating: 0, count: 32)))
            let prk = try key.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
                try extractor.authenticationCode([bytes])
            }
            _ = prk.copyBytes(to: out.bindMemory(to: UInt8.self))
        }
        let expander = try HMACKey(key: pseudoRandomKey)
        let infoBytes = Array(info.utf8)
        return try SecureBytes(count: length) { (out: UnsafeMutableRawBufferPointer) throws in
            var previous = Data()
            var offset = 0
            var counter: UInt8 = 1
            while offset < length {
                let block = try previous.withUnsafeBytes { (previousBytes: UnsafeRawBufferPointer) throws in
                    try infoBytes.withUnsafeBytes { (infoBuffer: UnsafeRawBufferPointer) throws in
                        try withUnsafeBytes(of: counter) { (counterBytes: UnsafeRawBufferPointer) throws in
                            try expander.authenticationCode([previousBytes, infoBuffer, counterBytes])
                        }
                    }
                }
                let take = Swift.min(32, length - offset)
                for index in 0..<take { out[offset + index] = block[index] }
                previous = block
                offset += take
                counter &+= 1
            }
            previous.resetBytes(in: 0..<previous.count)
        }
    }
}
