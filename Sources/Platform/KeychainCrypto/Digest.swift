import COpenSSL
import FoundationEssentials
import KeychainBytes

/// Plain message digests. The keychain never stores one of these of a secret or an attribute value;
/// SHA-256 serves key derivation, SHA-1 the `sha1` attribute that Apple's API returns.
public enum Digest {
    nonisolated(unsafe) private static let sha256Algorithm: OpaquePointer? = libcrypto.EVP_MD_fetch(nil, "SHA256", nil)
    static var sha256Fetched: OpaquePointer? { sha256Algorithm }
    nonisolated(unsafe) private static let sha1Algorithm: OpaquePointer? = libcrypto.EVP_MD_fetch(nil, "SHA1", nil)

    public static func sha256(_ bytes: UnsafeRawBufferPointer) throws -> [UInt8] {
        try digest(bytes, algorithm: sha256Algorithm, size: 32)
    }

    public static func sha256(_ data: Data) throws -> Data {
        Data(try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in try sha256(bytes) })
    }

    public static func sha1(_ data: Data) throws -> Data {
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in try sha1(bytes) }
    }

    /// SHA-1 of bytes in place (wiped memory, say), with no copy of them made.
    public static func sha1(_ bytes: UnsafeRawBufferPointer) throws -> Data {
        Data(try digest(bytes, algorithm: sha1Algorithm, size: 20))
    }

    /// MD5 of `data`: only to check formats of other programs that use it (gnome-keyring's keyring
    /// files), never for anything of the keychain's own.
    public static func md5(_ bytes: UnsafeRawBufferPointer) throws -> Data {
        guard let algorithm = libcrypto.EVP_MD_fetch(nil, "MD5", nil) else {
            throw CryptoError.libraryFailure("EVP_MD_fetch")
        }
        defer { libcrypto.EVP_MD_free(algorithm) }
        return Data(try digest(bytes, algorithm: algorithm, size: 16))
    }

    /// The digest of `data` with `hash` (for a key in hardware, which signs digests only).
    public static func hash(_ data: Data, _ hash: Hash) throws -> Data {
        let name =
            switch hash {
            case .sha1: "SHA1"
            case .sha224: "SHA224"
            case .sha256: "SHA256"
            case .sha384: "SHA384"
            case .sha512: "SHA512"
            }
        guard let algorithm = libcrypto.EVP_MD_fetch(nil, name, nil) else {
            throw CryptoError.libraryFailure("EVP_MD_fetch")
        }
        defer { libcrypto.EVP_MD_free(algorithm) }
        return Data(try data.withUnsafeBytes { try digest($0, algorithm: algorithm, size: hash.length) })
    }

    private static func digest(_ bytes: UnsafeRawBufferPointer, algorithm: OpaquePointer?, size: Int)
        throws -> [UInt8]
    {
        var output = [UInt8](repeating: 0, count: size)
        var length: UInt32 = 0
        let empty: UInt8 = 0
        let ok = withUnsafePointer(to: empty) { emptyPointer in
            libcrypto.EVP_Digest(
                bytes.baseAddress ?? UnsafeRawPointer(emptyPointer), bytes.count, &output, &length, algorithm, nil)
        }
        guard ok == 1 else { throw CryptoError.libraryFailure("EVP_Digest") }
        return output
    }
}

/// SHA-256 of a stream of chunks, for inputs too large to hold at once (an executable the daemon
/// hashes is read a megabyte at a time).
public final class SHA256Stream {
    private let context: OpaquePointer

    public init() throws {
        guard let context = libcrypto.EVP_MD_CTX_new() else { throw CryptoError.libraryFailure("EVP_MD_CTX_new") }
        self.context = context
        guard libcrypto.EVP_DigestInit_ex2(context, Digest.sha256Fetched, nil) == 1 else {
            libcrypto.EVP_MD_CTX_free(context)
            throw CryptoError.libraryFailure("EVP_DigestInit_ex2")
        }
    }

    deinit { libcrypto.EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        guard libcrypto.EVP_DigestUpdate(context, base, bytes.count) == 1 else {
            throw CryptoError.libraryFailure("EVP_DigestUpdate")
        }
    }

    public func finish() throws -> Data {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard libcrypto.EVP_DigestFinal_ex(context, &output, &length) == 1, length == 32 else {
            throw CryptoError.libraryFailure("EVP_DigestFinal_ex")
        }
        return Data(output)
    }
}
