import COpenSSL
import FoundationEssentials
import KeychainBytes

/// A Diffie-Hellman key pair in RFC 2409's Second Oakley Group (the 1024-bit MODP group, generator 2):
/// the group the freedesktop Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` sessions fix, kept
/// for as long as one session lives. The private key stays inside OpenSSL, which wipes it when the
/// pair is released.
///
/// 1024 bits is weak by today's measure, and the protocol fixes it. What the exchange stops: a process
/// that only watches the session bus (a monitor, which a process of the same user may be) reading the
/// secrets that cross it. What it does not: an active process of the same user (it can open a session
/// of its own and ask, or trace the client), or someone who records the traffic and can later break
/// Diffie-Hellman in this fixed, well-known 1024-bit group.
public final class OakleyGroup2KeyPair: @unchecked Sendable {
    // Made in init and only read after: OpenSSL's key objects may be read by several threads.
    private let key: OpaquePointer

    /// Bytes of the prime, of a public key and of a shared secret.
    public static let size = 128

    /// The group's prime (RFC 2409 §6.2), big-endian.
    static let prime: [UInt8] =
        Hex.decode(
            """
            FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD\
            EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED\
            EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF
            """
        ).map { Array($0) } ?? []

    /// A new key pair.
    public init() throws(CryptoError) {
        let parameters = try Self.key(publicKey: nil)
        defer { libcrypto.EVP_PKEY_free(parameters) }
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_pkey(nil, parameters, nil) else {
            throw .libraryFailure("DH key context")
        }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        var made: OpaquePointer?
        guard libcrypto.EVP_PKEY_keygen_init(context) == 1, libcrypto.EVP_PKEY_generate(context, &made) == 1, let made
        else {
            libcrypto.ERR_clear_error()
            throw .libraryFailure("DH key generation")
        }
        key = made
    }

    deinit { libcrypto.EVP_PKEY_free(key) }

    /// The public key, big-endian, padded to 128 bytes.
    public func publicKey() throws(CryptoError) -> Data {
        var value: OpaquePointer?
        guard libcrypto.EVP_PKEY_get_bn_param(key, OpenSSLParameters.name("pub"), &value) == 1, let value else {
            libcrypto.ERR_clear_error()
            throw .libraryFailure("DH public key")
        }
        defer { libcrypto.BN_free(value) }
        var bytes = Data(count: Self.size)
        let written = bytes.withUnsafeMutableBytes {
            libcrypto.BN_bn2binpad(value, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(Self.size))
        }
        guard written == Int32(Self.size) else { throw .libraryFailure("DH public key size") }
        return bytes
    }

    /// The shared secret with the peer whose public key is `peer` (big-endian, at most 128 bytes),
    /// padded to 128 bytes, in wiped memory. A value that is no public key of the group (0, 1, p − 1,
    /// p or more) is refused with `.invalidPublicKey`, before any arithmetic with it.
    public func sharedSecret(withPeer encoded: Data) throws(Failure) -> SecureBytes {
        // Leading zero bytes (a sign byte, or padding to any length) do not change the number.
        let peer = Data(encoded.drop(while: { $0 == 0 }))
        guard Self.isPublicKey(peer) else {
            throw .invalidPublicKey("not a public key of the 1024-bit MODP group (1 < y < p − 1)")
        }
        let peerKey: OpaquePointer
        do {
            peerKey = try Self.key(publicKey: peer)
        } catch {
            throw .library("the peer's key object")
        }
        defer { libcrypto.EVP_PKEY_free(peerKey) }
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw .library("DH context") }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        guard libcrypto.EVP_PKEY_derive_init(context) == 1, libcrypto.EVP_PKEY_CTX_set_dh_pad(context, 1) == 1 else {
            libcrypto.ERR_clear_error()
            throw .library("DH derivation setup")
        }
        // The peer is checked again by OpenSSL as it is set (its range, as above).
        guard libcrypto.EVP_PKEY_derive_set_peer(context, peerKey) == 1 else {
            libcrypto.ERR_clear_error()
            throw .invalidPublicKey("OpenSSL refused the peer's public key")
        }
        do {
            return try SecureBytes(count: Self.size) { out in
                var written = Self.size
                guard
                    libcrypto.EVP_PKEY_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &written)
                        == 1,
                    written == Self.size
                else {
                    libcrypto.ERR_clear_error()
                    throw Failure.library("DH derivation")
                }
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .library("\(error)")
        }
    }

    /// Why a key agreement did not happen.
    public enum Failure: Error, Equatable, Sendable {
        /// The peer's public key is not one of the group's.
        case invalidPublicKey(String)
        /// OpenSSL failed.
        case library(String)
    }

    /// Whether `bytes` (big-endian) is in 2 … p − 2.
    private static func isPublicKey(_ bytes: Data) -> Bool {
        guard !bytes.isEmpty, bytes.count <= size else { return false }
        let padded = [UInt8](repeating: 0, count: size - bytes.count) + Array(bytes)
        var pMinusOne = prime
        pMinusOne[size - 1] -= 1  // the prime ends in 0xFF
        let two = [UInt8](repeating: 0, count: size - 1) + [2]
        return !padded.lexicographicallyPrecedes(two) && padded.lexicographicallyPrecedes(pMinusOne)
    }

    /// The group's parameters as a key object, with `publicKey` when one is given.
    private static func key(publicKey: Data?) throws(CryptoError) -> OpaquePointer {
        guard let builder = libcrypto.OSSL_PARAM_BLD_new() else { throw .libraryFailure("param builder") }
        defer { libcrypto.OSSL_PARAM_BLD_free(builder) }
        var numbers: [OpaquePointer] = []
        defer { for number in numbers { libcrypto.BN_free(number) } }
        func number(_ bytes: [UInt8]) -> OpaquePointer? {
            let made = bytes.withUnsafeBufferPointer { libcrypto.BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
            if let made { numbers.append(made) }
            return made
        }
        guard let p = number(prime), let g = number([2]),
            libcrypto.OSSL_PARAM_BLD_push_BN(builder, OpenSSLParameters.name("p"), p) == 1,
            libcrypto.OSSL_PARAM_BLD_push_BN(builder, OpenSSLParameters.name("g"), g) == 1
        else { throw .libraryFailure("DH parameters") }
        if let publicKey {
            guard let y = number(Array(publicKey)),
                libcrypto.OSSL_PARAM_BLD_push_BN(builder, OpenSSLParameters.name("pub"), y) == 1
            else { throw .libraryFailure("DH public key") }
        }
        guard let parameters = libcrypto.OSSL_PARAM_BLD_to_param(builder) else {
            throw .libraryFailure("DH parameters")
        }
        defer { libcrypto.OSSL_PARAM_free(parameters) }
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_name(nil, "DH", nil) else { throw .libraryFailure("no DH") }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        // EVP_PKEY_KEY_PARAMETERS (0x84) or EVP_PKEY_PUBLIC_KEY (0x86): macros Swift cannot import.
        guard libcrypto.EVP_PKEY_fromdata_init(context) == 1,
            libcrypto.EVP_PKEY_fromdata(context, &key, publicKey == nil ? 0x84 : 0x86, parameters) == 1, let key
        else {
            libcrypto.ERR_clear_error()
            throw .libraryFailure("DH key")
        }
        return key
    }
}
