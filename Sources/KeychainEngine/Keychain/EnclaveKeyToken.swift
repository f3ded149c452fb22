import Foundation
import KeychainCore
import KeychainCrypto
import KeychainKeybag

/// An ephemeral enclave key (`kSecAttrIsPermanent` false): no item holds it, so its `SecKey` holds
/// this token instead, as Apple's holds the Secure Enclave's token object. The private key inside is
/// wrapped by the device root, bound to everything else in the token (its public key, protection
/// class, access control and the enrolled biometry it was made under); so the token is useless on
/// another device, and none of its parts can be changed without the unwrap failing.
///
/// Layout: version (2) ‖ public key ‖ protection ‖ access control (0, or 1 ‖ flags) ‖ biometry
/// binding (0, or 1 ‖ bytes) ‖ wrapped private key; byte strings and strings length-prefixed.
struct EnclaveKeyToken: Sendable {
    static let version: UInt8 = 2

    let publicKey: Data
    let protection: ProtectionClass
    let accessControl: AccessControlPolicy?
    let biometryBinding: Data?
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
        wrapped: Data
    ) {
        self.publicKey = publicKey
        self.protection = protection
        self.accessControl = accessControl
        self.biometryBinding = biometryBinding
        self.wrapped = wrapped
    }

    /// Decodes a token a client sent back; anything else is `errSecParam`.
    init(decoding data: Data) throws {
        var reader = ByteReader(data)
        do {
            guard try reader.read() as UInt8 == Self.version else { throw ByteReader.Truncated() }
            publicKey = try reader.readBytes()
            guard let protection = ProtectionClass(attributeValue: try reader.readString()) else {
                throw ByteReader.Truncated()
            }
            self.protection = protection
            switch try reader.read() as UInt8 {
            case 0: accessControl = nil
            case 1:
                accessControl = AccessControlPolicy(protection: protection, flags: UInt(try reader.read() as UInt64))
            default: throw ByteReader.Truncated()
            }
            switch try reader.read() as UInt8 {
            case 0: biometryBinding = nil
            case 1: biometryBinding = try reader.readBytes()
            default: throw ByteReader.Truncated()
            }
            wrapped = try reader.readBytes()
            guard reader.isAtEnd else { throw ByteReader.Truncated() }
        } catch {
            throw KeychainError.invalidParameter("the enclave key's token is not one this keychain made")
        }
    }
}
