import FoundationEssentials
import KeychainBytes

/// Apple's ECIES (`SecKeyAlgorithm.ecies…`): an ephemeral key on the recipient's curve, ECDH with the
/// recipient's key, the ANSI X9.63 KDF over the shared secret with the ephemeral public key as shared
/// info, and AES-GCM (a 128-bit key for curves up to 256 bits, 256-bit above) with a 16-byte tag. The
/// output is `ephemeral public key (04‖X‖Y) ‖ ciphertext ‖ tag`. The IV is 16 zero bytes, or, in the
/// variable-IV forms, the 16 bytes the KDF gives after the key.
public struct ECIESScheme: Sendable, Equatable {
    public var hash: Hash
    public var variableIV: Bool

    public init(hash: Hash, variableIV: Bool) {
        self.hash = hash
        self.variableIV = variableIV
    }
}

extension AsymmetricKey {
    public func eciesEncrypt(_ plaintext: Data, _ scheme: ECIESScheme) throws(Failure) -> Data {
        guard case .ec(let curve) = kind else { throw .unsupported("ECIES needs an EC key") }
        let recipient = try publicKey()
        let ephemeral = try AsymmetricKey.generate(.ec(curve))
        let ephemeralPublic = try ephemeral.publicRepresentation()
        let shared = try ephemeral.sharedSecret(with: recipient)
        let (key, iv) = try Self.eciesKeys(shared, ephemeralPublic, curve, scheme)
        do {
            let (ciphertext, tag) = try AESGCM.sealDetached(plaintext, key: key, iv: iv)
            return ephemeralPublic + ciphertext + tag
        } catch {
            throw .library("ECIES encryption")
        }
    }

    public func eciesDecrypt(_ ciphertext: Data, _ scheme: ECIESScheme) throws(Failure) -> SecureBytes {
        guard case .ec(let curve) = kind, isPrivate else {
            throw .unsupported("ECIES decryption needs a private EC key")
        }
        do {
            return try Self.eciesDecrypt(ciphertext, curve: curve, scheme) { try sharedSecret(with: $0) }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .library("ECIES decryption")
        }
    }

    /// ECIES decryption for a recipient on `curve` whose private key is held elsewhere: `agree` gives
    /// the ECDH shared secret with the sender's ephemeral key. Errors are `Failure`s, or what `agree`
    /// throws.
    public static func eciesDecrypt(
        _ ciphertext: Data, curve: Curve, _ scheme: ECIESScheme, agree: (AsymmetricKey) throws -> SecureBytes
    ) throws -> SecureBytes {
        let pointLength = 1 + 2 * curve.coordinateSize
        guard ciphertext.count >= pointLength + 16 else { throw Failure.invalidKey("the ciphertext is too short") }
        let ephemeralPublic = Data(ciphertext.prefix(pointLength))
        let ephemeral = try AsymmetricKey.importing(ephemeralPublic, kind: .ec, isPrivate: false)
        let shared = try agree(ephemeral)
        let (key, iv) = try Self.eciesKeys(shared, ephemeralPublic, curve, scheme)
        let body = ciphertext.dropFirst(pointLength)
        do {
            return try AESGCM.openDetached(Data(body.dropLast(16)), tag: Data(body.suffix(16)), key: key, iv: iv)
        } catch {
            throw Failure.invalidKey("the ciphertext does not decrypt with this key")
        }
    }

    private static func eciesKeys(_ shared: SecureBytes, _ ephemeralPublic: Data, _ curve: Curve, _ scheme: ECIESScheme)
        throws(Failure) -> (SecureBytes, Data)
    {
        let keyLength = curve.rawValue <= 256 ? 16 : 32
        let derived: SecureBytes
        do {
            derived = try KeyDerivation.x963(
                secret: shared, sharedInfo: ephemeralPublic, hash: scheme.hash,
                length: keyLength + (scheme.variableIV ? 16 : 0))
        } catch {
            throw .library("X9.63 KDF")
        }
        return derived.withUnsafeBytes { bytes in
            let key = SecureBytes(copying: UnsafeRawBufferPointer(rebasing: bytes[0..<keyLength]))
            let iv = scheme.variableIV ? Data(bytes[keyLength..<keyLength + 16]) : Data(count: 16)
            return (key, iv)
        }
    }
}
