import Foundation
import KeychainBytes
import KeychainCrypto

/// A Secret Service session: how secrets cross the bus to and from the connection that opened it. With
/// `plain` they travel as they are (the bus is the only protection); with
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7` under an AES-128 key agreed by Diffie-Hellman in the 1024-bit
/// MODP group and HKDF-SHA256 (no salt, no info), each with a fresh IV as its parameters. The exchange
/// stops a passive reader of the session bus (a monitor), not an active process of the same user, which
/// could open a session of its own anyway.
final class SecretServiceSession {
    enum Algorithm: String {
        case plain
        case dh = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
    }

    let owner: String
    let algorithm: Algorithm
    private let key: SecureBytes?

    private init(owner: String, algorithm: Algorithm, key: SecureBytes?) {
        self.owner = owner
        self.algorithm = algorithm
        self.key = key
    }

    /// Opens a session for `owner` (a unique bus name): the session and the output `OpenSession`
    /// returns (nothing for `plain`, this side's public key for the exchange).
    static func open(owner: String, algorithm: String, input: Data?) throws(SecretServiceError) -> (
        SecretServiceSession, Data?
    ) {
        switch Algorithm(rawValue: algorithm) {
        case .plain:
            return (SecretServiceSession(owner: owner, algorithm: .plain, key: nil), nil)
        case .dh:
            guard let input else {
                throw SecretServiceError(.invalidArguments, "the exchange's input is the client's public key (ay)")
            }
            do {
                let pair = try OakleyGroup2KeyPair()
                let shared = try pair.sharedSecret(withPeer: input)
                let key = try KeyDerivation.hkdf(key: shared, info: "", length: AESCBC.keySize)
                return (SecretServiceSession(owner: owner, algorithm: .dh, key: key), try pair.publicKey())
            } catch let failure as OakleyGroup2KeyPair.Failure {
                throw SecretServiceError(.invalidArguments, "the client's public key is refused: \(failure)")
            } catch {
                throw SecretServiceError(.failed, "the key exchange failed: \(error)")
            }
        case nil:
            throw SecretServiceError(
                .notSupported, "the algorithm \(algorithm) is not supported (plain, \(Algorithm.dh.rawValue))")
        }
    }

    /// A secret as it crosses the bus: (parameters, value).
    func encode(_ secret: SecureBytes) throws(SecretServiceError) -> (parameters: Data, value: Data) {
        guard let key else { return (Data(), secret.withUnsafeBytes { Data($0) }) }
        do {
            let (iv, ciphertext) = try AESCBC.encrypt(secret, key: key)
            return (iv, ciphertext)
        } catch {
            throw SecretServiceError(.failed, "a secret could not be encrypted: \(error)")
        }
    }

    /// A secret the client sent in this session.
    func decode(parameters: Data, value: Data) throws(SecretServiceError) -> SecureBytes {
        guard let key else {
            guard parameters.isEmpty else {
                throw SecretServiceError(.invalidArguments, "a plain session's secrets have no parameters")
            }
            return SecureBytes(copying: value)
        }
        guard parameters.count == AESCBC.blockSize else {
            throw SecretServiceError(.invalidArguments, "a secret's parameters must be its 16-byte IV")
        }
        do {
            return try AESCBC.decrypt(value, key: key, iv: parameters)
        } catch {
            throw SecretServiceError(.invalidArguments, "a secret that does not decrypt (its length or padding)")
        }
    }
}
