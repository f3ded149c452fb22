import COpenSSL
import FoundationEssentials
import KeychainBytes

extension AsymmetricKey {
    /// ECDH: the shared secret of this private key and `peer`'s public key (the x coordinate of the
    /// shared point, as long as the curve's coordinates), in wiped memory. For the prime curves here
    /// the cofactor is 1, so the cofactor variant is the same computation.
    public func sharedSecret(with peer: AsymmetricKey) throws(Failure) -> SecureBytes {
        guard case .ec(let curve) = kind, isPrivate else { throw .unsupported("key exchange needs a private EC key") }
        guard case .ec(let peerCurve) = peer.kind, peerCurve == curve else {
            throw .invalidKey("the peer's key is not on the same curve")
        }
        guard let context = libcrypto.EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw .library("key context") }
        defer { libcrypto.EVP_PKEY_CTX_free(context) }
        guard libcrypto.EVP_PKEY_derive_init(context) == 1, libcrypto.EVP_PKEY_derive_set_peer(context, peer.key) == 1
        else {
            libcrypto.ERR_clear_error()
            throw .invalidKey("the peer's key cannot be used")
        }
        var length = 0
        guard libcrypto.EVP_PKEY_derive(context, nil, &length) == 1, length == curve.coordinateSize else {
            throw .library("shared secret size")
        }
        do {
            return try SecureBytes(count: length) { out in
                var written = length
                guard
                    libcrypto.EVP_PKEY_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &written)
                        == 1,
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
