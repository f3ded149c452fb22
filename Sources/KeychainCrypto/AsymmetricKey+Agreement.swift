import COpenSSL
import Foundation

extension AsymmetricKey {
    /// ECDH: the shared secret of this private key and `peer`'s public key (the x coordinate of the
    /// shared point, as long as the curve's coordinates), in wiped memory. For the prime curves here
    /// the cofactor is 1, so the cofactor variant is the same computation.
    public func sharedSecret(with peer: AsymmetricKey) throws(Failure) -> SecureBytes {
        guard case .ec(let curve) = kind, isPrivate else { throw .unsupported("key exchange needs a private EC key") }
        guard case .ec(let peerCurve) = peer.kind, peerCurve == curve else {
            throw .invalidKey("the peer's key is not on the same curve")
        }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw .library("key context") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer.key) == 1 else {
            ERR_clear_error()
            throw .invalidKey("the peer's key cannot be used")
        }
        var length = 0
        guard EVP_PKEY_derive(context, nil, &length) == 1, length == curve.coordinateSize else {
            throw .library("shared secret size")
        }
        do {
            return try SecureBytes(count: length) { out in
                var written = length
                guard EVP_PKEY_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &written) == 1,
                    written == length
                else { throw Failure.library("key agreement") }
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .library("\(error)")
        }
    }
}

extension KeyDerivation {
    /// The ANSI X9.63 KDF over `secret` with `sharedInfo`, through OpenSSL's `EVP_KDF` ("X963KDF").
    public static func x963(secret: SecureBytes, sharedInfo: Data, hash: Hash, length: Int) throws -> SecureBytes {
        guard (1...(1 << 20)).contains(length) else { throw CryptoError.libraryFailure("X9.63 KDF length") }
        guard let kdf = EVP_KDF_fetch(nil, "X963KDF", nil) else { throw CryptoError.libraryFailure("no X963KDF") }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw CryptoError.libraryFailure("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(context) }
        return try hash.name.withCString { digest in
            try SecureBytes(count: length) { out in
                let ok = secret.withUnsafeBytes { secretBytes in
                    sharedInfo.withUnsafeBytes { info in
                        var parameters = [
                            OSSL_PARAM_construct_utf8_string(
                                parameterName("digest"), UnsafeMutablePointer(mutating: digest), 0),
                            OSSL_PARAM_construct_octet_string(
                                parameterName("key"), UnsafeMutableRawPointer(mutating: secretBytes.baseAddress),
                                secretBytes.count),
                            OSSL_PARAM_construct_octet_string(
                                parameterName("info"), UnsafeMutableRawPointer(mutating: info.baseAddress), info.count),
                            OSSL_PARAM_construct_end(),
                        ]
                        return EVP_KDF_derive(
                            context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), length, &parameters)
                    }
                }
                guard ok == 1 else { throw CryptoError.libraryFailure("X9.63 KDF") }
            }
        }
    }

    private static func parameterName(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}
