import Foundation
import KeychainCore
import KeychainCrypto
import KeychainKeybag

/// An ephemeral enclave key (`kSecAttrIsPermanent` false): no item holds it, so its `SecKey` holds
/// this token instead, as Apple's holds the Secure Enclave's token object. The private key inside is
/// sealed as a guarded item's secret is — under its protection class's key and the factors its
/// access control binds it to (the enrolled biometry, the passcode's class) — and then wrapped by the
/// device root; both bound to everything else in the token (its public key, protection class,
/// access control, the biometry set it was made under, the salt). So the token opens only in this
/// keychain on this device, only while its class is available, never after the keychain was erased
/// or the binding died, and none of its parts can be changed.
///
/// Layout: version (2) ‖ public key ‖ protection ‖ access control (0, or 1 ‖ flags) ‖ biometry
/// binding (0, or 1 ‖ bytes) ‖ salt (16) ‖ wrapped sealed private key; byte strings and strings
/// length-prefixed.
struct EnclaveKeyToken: Sendable {
    static let version: UInt8 = 2

    let publicKey: Data
    let protection: ProtectionClass
    let accessControl: AccessControlPolicy?
    let biometryBinding: Data?
    let salt: Data
    let wrapped: Data

    /// What the wrapping is bound to: every part but the wrapped key.
    var header: Data {
        var writer = ByteWriter()
        writer.write(Self.version)
        writer.writeBytes(publicKey)
        writer.writeString(protection.attributeValue)
        if let accessControl {
            writer.write(UInt8(1))
            writer.write(UInt64(accessControl.flags))
        } else {
            writer.write(UInt8(0))
        }
        if let biometryBinding {
            writer.write(UInt8(1))
            writer.writeBytes(biometryBinding)
        } else {
            writer.write(UInt8(0))
        }
        writer.writeRaw(salt)
        return writer.data
    }

    /// The wrapping context: the token's purpose and its header.
    static func context(header: Data) -> Data { Data("ephemeral enclave key".utf8) + header }

    var encoded: Data {
        var writer = ByteWriter()
        writer.writeRaw(header)
        writer.writeBytes(wrapped)
        return writer.data
    }

    init(
        publicKey: Data, protection: ProtectionClass, accessControl: AccessControlPolicy?, biometryBinding: Data?,
        salt: Data, wrapped: Data = Data()
    ) {
        self.publicKey = publicKey
        self.protection = protection
        self.accessControl = accessControl
        self.biometryBinding = biometryBinding
        self.salt = salt
        self.wrapped = wrapped
    }

    /// The same token with its wrapped key.
    func wrapping(_ wrapped: Data) -> EnclaveKeyToken {
        EnclaveKeyToken(
            publicKey: publicKey, protection: protection, accessControl: accessControl,
            biometryBinding: biometryBinding, salt: salt, wrapped: wrapped)
    }

    /// Decodes a token a client sent back; anything else is `errSecParam`.
    init(decoding data: Data) throws {
        var reader = ByteReader(data)
        do {
            guard try reader.read() as UInt8 == Self.version else { throw ByteReader.Truncated() }
            publicKey = try reader.readBytes()
            // Not yet authenticated: every part is parsed without trusting it (no trap, no lossy read).
            guard let name = try reader.readValidString(), let protection = ProtectionClass(attributeValue: name)
            else { throw ByteReader.Truncated() }
            self.protection = protection
            switch try reader.read() as UInt8 {
            case 0: accessControl = nil
            case 1:
                guard let flags = UInt(exactly: try reader.read() as UInt64) else { throw ByteReader.Truncated() }
                accessControl = AccessControlPolicy(protection: protection, flags: flags)
            default: throw ByteReader.Truncated()
            }
            switch try reader.read() as UInt8 {
            case 0: biometryBinding = nil
            case 1: biometryBinding = try reader.readBytes()
            default: throw ByteReader.Truncated()
            }
            salt = try reader.readRaw(16)
            wrapped = try reader.readBytes()
            guard reader.isAtEnd else { throw ByteReader.Truncated() }
        } catch {
            throw KeychainError.invalidParameter("the enclave key's token is not one this keychain made")
        }
    }
}
