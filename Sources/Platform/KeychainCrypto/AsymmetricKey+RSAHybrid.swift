import FoundationEssentials
import KeychainBytes

/// Apple's RSA-OAEP-AES-GCM (`SecKeyAlgorithm.rsaEncryptionOAEP…AESGCM`): a random AES session key
/// (256-bit for RSA keys of 4096 bits and more, 128-bit below) wrapped with RSA-OAEP of the named hash,
/// the message sealed with AES-GCM under that key with 16 zero bytes as IV (safe: every session key
/// seals one message) and the recipient's public key (PKCS#1) as additional data, so a ciphertext
/// cannot be re-addressed to another key. The output is `wrapped key ‖ ciphertext ‖ tag (16)`.
extension AsymmetricKey {
    public func rsaHybridEncrypt(_ plaintext: Data, hash: Hash) throws(Failure) -> Data {
        guard case .rsa = kind else { throw .unsupported("RSA-OAEP-AES-GCM needs an RSA key") }
        let recipient = try publicKey()
        let aad = try recipient.publicRepresentation()
        let sessionKey: SecureBytes
        do {
            sessionKey = try SecureBytes(randomCount: sessionKeyLength)
        } catch {
            throw .library("random session key")
        }
        var exposed = sessionKey.withUnsafeBytes { Data($0) }
        defer { exposed.resetBytes(in: 0..<exposed.count) }
        let wrapped = try recipient.encrypt(exposed, .rsaOAEP(hash))
        do {
            let (ciphertext, tag) = try AESGCM.sealDetached(
                plaintext, key: sessionKey, iv: Data(count: 16), aad: aad)
            return wrapped + ciphertext + tag
        } catch {
            throw .library("AES-GCM encryption")
        }
    }

    /// The plaintext in wiped memory; a ciphertext that does not open with this key throws `.invalidKey`.
    public func rsaHybridDecrypt(_ ciphertext: Data, hash: Hash) throws(Failure) -> SecureBytes {
        guard case .rsa = kind, isPrivate else {
            throw .unsupported("RSA-OAEP-AES-GCM decryption needs a private RSA key")
        }
        guard ciphertext.count >= blockSize + 16 else { throw .invalidKey("the ciphertext is too short") }
        let sessionKey = try decrypt(Data(ciphertext.prefix(blockSize)), .rsaOAEP(hash))
        guard sessionKey.count == sessionKeyLength else {
            throw .invalidKey("the ciphertext does not decrypt with this key")
        }
        let aad = try publicKey().publicRepresentation()
        let body = ciphertext.dropFirst(blockSize)
        do {
            return try AESGCM.openDetached(
                Data(body.dropLast(16)), tag: Data(body.suffix(16)), key: sessionKey, iv: Data(count: 16), aad: aad)
        } catch {
            throw .invalidKey("the ciphertext does not decrypt with this key")
        }
    }

    /// Whether this key can carry the scheme: an RSA key whose OAEP block holds the session key.
    public func supportsRSAHybrid(hash: Hash) -> Bool {
        guard case .rsa = kind else { return false }
        return blockSize - 2 * hash.length - 2 >= sessionKeyLength
    }

    private var sessionKeyLength: Int { blockSize * 8 >= 4096 ? 32 : 16 }
}
