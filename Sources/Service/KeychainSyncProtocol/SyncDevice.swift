import Foundation
import KeychainBytes
import KeychainCrypto

/// A device's public identity in an account: its id, its signing key (P-256, ECDSA with SHA-256)
/// and its encryption key (P-256, ECIES), each an uncompressed X9.63 point, and a name for people.
/// The id is the first 16 bytes of SHA-256 of the signing key, so no device can claim another's id.
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
        id = try Self.id(of: signingKey)
    }

    public static func id(of signingKey: Data) throws(SyncError) -> Data {
        do { return try Digest.sha256(Data("swift-keychain sync device".utf8) + signingKey).prefix(idSize) } catch {
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
public struct SyncDeviceKeys: Sendable {
    public let signing: AsymmetricKey
    public let encryption: AsymmetricKey
    public let device: SyncDevice

    public init(signing: AsymmetricKey, encryption: AsymmetricKey, name: String) throws(SyncError) {
        guard signing.isPrivate, encryption.isPrivate, case .ec(.p256) = signing.kind, case .ec(.p256) = encryption.kind
        else { throw SyncError(.invalid, "a device's keys are P-256 private keys") }
        self.signing = signing
        self.encryption = encryption
        do {
            device = try SyncDevice(
                signingKey: try signing.publicRepresentation(), encryptionKey: try encryption.publicRepresentation(),
                name: name)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.invalid, "a device key does not export")
        }
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
        do { return try signing.sign(message, .ecdsa(.sha256, .message)) } catch {
            throw SyncError(.server, "cannot sign: \(error)")
        }
    }
}
