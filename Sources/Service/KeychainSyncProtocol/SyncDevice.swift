import Foundation
import KeychainBytes
import KeychainCrypto

/// A device's public identity in an account: its id, its signing key (P-256, ECDSA with SHA-256)
/// and its encryption key (P-256, ECIES), each an uncompressed X9.63 point, and a name for people.
/// The id is the first 16 bytes of SHA-256 of both keys, so no device can claim another's id, and the
/// id a user carries from the waiting device to the approving one (`sync approve ID`) names its
/// encryption key too: a server that put a key of its own in the waiting device's place would change
/// the id, and the approval would find no such device.
public struct SyncDevice: Sendable, Equatable {
    public static let idSize = 16
    public static let maximumName = 128
    public var id: Data
    public var signingKey: Data
    public var encryptionKey: Data
    public var name: String

    public init(signingKey: Data, encryptionKey: Data, name: String) throws(SyncError) {
        guard signingKey.count == 65, encryptionKey.count == 65, name.utf8.count <= Self.maximumName else {
            throw SyncError(.malformed, "a device's keys are P-256 points and its name at most 128 bytes")
        }
        self.signingKey = signingKey
        self.encryptionKey = encryptionKey
        self.name = name
        id = try Self.id(signingKey: signingKey, encryptionKey: encryptionKey)
    }

    public static func id(signingKey: Data, encryptionKey: Data) throws(SyncError) -> Data {
        do {
            return try Digest.sha256(Data("swift-keychain sync device v2".utf8) + signingKey + encryptionKey)
                .prefix(idSize)
        } catch {
            throw SyncError(.server, "SHA-256 failed")
        }
    }

    /// Whether `signature` is this device's over `message` (false for a key that does not import).
    public func verifies(_ signature: Data, over message: Data) -> Bool {
        guard let key = try? AsymmetricKey.importing(signingKey, kind: .ec, isPrivate: false),
            case .ec(.p256) = key.kind
        else { return false }
        return (try? key.verify(signature, of: message, .ecdsa(.sha256, .message))) == true
    }

    public func encode(into writer: inout ByteWriter) {
        writer.writeBytes(signingKey)
        writer.writeBytes(encryptionKey)
        writer.writeString(name)
    }

    static func decode(from reader: inout SyncReader) throws(SyncError) -> SyncDevice {
        let signing = try reader.fixed(65)
        let encryption = try reader.fixed(65)
        let name = try reader.string(max: maximumName)
        return try SyncDevice(signingKey: signing, encryptionKey: encryption, name: name)
    }
}

/// A device's private keys: what signs its writes and views and opens the zone keys shared with it.
/// Software keys, or keys the keychain's device root holds (a TPM's: the private halves never in this
/// process), used through what the keychain gives for them.
public struct SyncDeviceKeys: Sendable {
    /// How the private keys are held, which is what a keychain keeps to use them again.
    public enum Holder: Sendable {
        case software(signing: AsymmetricKey, encryption: AsymmetricKey)
        /// The keychain's tokens of keys its device root holds (`kSecAttrTokenIDSecureEnclave`).
        case enclave(signingToken: Data, encryptionToken: Data)
    }

    public let device: SyncDevice
    public let holder: Holder
    private let signer: @Sendable (Data) throws -> Data
    private let agreer: @Sendable (Data) throws -> SecureBytes

    public init(signing: AsymmetricKey, encryption: AsymmetricKey, name: String) throws(SyncError) {
        guard signing.isPrivate, encryption.isPrivate, case .ec(.p256) = signing.kind, case .ec(.p256) = encryption.kind
        else { throw SyncError(.invalid, "a device's keys are P-256 private keys") }
        do {
            device = try SyncDevice(
                signingKey: try signing.publicRepresentation(), encryptionKey: try encryption.publicRepresentation(),
                name: name)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.invalid, "a device key does not export")
        }
        holder = .software(signing: signing, encryption: encryption)
        signer = { message in try signing.sign(message, .ecdsa(.sha256, .message)) }
        agreer = { peer in
            try encryption.sharedSecret(with: try AsymmetricKey.importing(peer, kind: .ec, isPrivate: false))
        }
    }

    /// Keys held elsewhere: `sign` makes an ECDSA (SHA-256) signature of a message, `agree` the ECDH
    /// secret with a peer's public key (X9.63).
    public init(
        device: SyncDevice, signingToken: Data, encryptionToken: Data,
        sign: @escaping @Sendable (Data) throws -> Data, agree: @escaping @Sendable (Data) throws -> SecureBytes
    ) {
        self.device = device
        holder = .enclave(signingToken: signingToken, encryptionToken: encryptionToken)
        signer = sign
        agreer = agree
    }

    public static func generate(name: String) throws(SyncError) -> SyncDeviceKeys {
        do {
            return try SyncDeviceKeys(
                signing: try AsymmetricKey.generate(.ec(.p256)), encryption: try AsymmetricKey.generate(.ec(.p256)),
                name: name)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.server, "cannot make a device key")
        }
    }

    public func sign(_ message: Data) throws(SyncError) -> Data {
        do { return try signer(message) } catch let error as SyncError { throw error } catch {
            throw SyncError(.locked, "cannot sign with this device's key: \(error)")
        }
    }

    /// Opens what was sealed to this device's encryption key (ECIES): `forged` when it does not open,
    /// `locked` when the key could not be used.
    public func decrypt(_ ciphertext: Data, _ scheme: ECIESScheme) throws(SyncError) -> SecureBytes {
        struct Unusable: Error { let reason: String }
        do {
            return try AsymmetricKey.eciesDecrypt(ciphertext, curve: .p256, scheme) { ephemeral in
                do { return try agreer(try ephemeral.publicRepresentation()) } catch {
                    throw Unusable(reason: "\(error)")
                }
            }
        } catch let unusable as Unusable {
            throw SyncError(.locked, "cannot use this device's key: \(unusable.reason)")
        } catch {
            throw SyncError(.forged, "what was sealed to this device does not open with its key")
        }
    }
}
