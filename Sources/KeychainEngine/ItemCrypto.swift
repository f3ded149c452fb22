import Foundation
import KeychainCrypto
import KeychainKeybag
import KeychainStorage

/// Encryption of one item at rest.
///
/// Each item has two fresh AES-256-GCM keys, one for its attributes (the metadata blob) and one for
/// its secret (the secret blob), each wrapped by the class key of the item's protection class.
/// The authenticated data of every ciphertext and wrapped key names the row's identity, item class,
/// protection class and which blob it is, so a blob moved to another row, another class or the other
/// column no longer opens.
///
/// Blob layout: `version (1) ‖ wrapped item key (length-prefixed sealed box) ‖ sealed plaintext`.
enum ItemCrypto {
    static let blobVersion: UInt8 = 1

    enum Part: UInt8 {
        case metadata = 1
        case secret = 2
    }

    enum Failure: Error {
        /// The blob does not open: tampered, moved, truncated, or made with another key.
        case corrupt(String)
    }

    static func seal(
        _ plaintext: Data, part: Part, identity: Data, itemClass: ItemClass,
        protection: ProtectionClass, classKey: SecureBytes
    ) throws -> Data {
        let itemKey = try SecureBytes(randomCount: AESGCM.keySize)
        let (wrapAAD, aad) = associatedData(
            part: part, identity: identity, itemClass: itemClass, protection: protection)
        var writer = ByteWriter()
        writer.write(blobVersion)
        writer.writeBytes(try AESGCM.seal(itemKey, key: classKey, authenticating: wrapAAD))
        writer.writeRaw(try AESGCM.seal(plaintext, key: itemKey, authenticating: aad))
        return writer.data
    }

    static func open(
        _ blob: Data, part: Part, identity: Data, itemClass: ItemClass, protection: ProtectionClass,
        classKey: SecureBytes
    ) throws -> Data {
        var reader = ByteReader(blob)
        guard (try? reader.read() as UInt8) == blobVersion, let wrappedKey = try? reader.readBytes(),
            let sealed = try? reader.readRaw(reader.remaining)
        else { throw Failure.corrupt("malformed blob") }
        let (wrapAAD, aad) = associatedData(
            part: part, identity: identity, itemClass: itemClass, protection: protection)
        do {
            let itemKey = try AESGCM.openSecure(wrappedKey, key: classKey, authenticating: wrapAAD)
            return try AESGCM.open(sealed, key: itemKey, authenticating: aad)
        } catch CryptoError.authenticationFailed, CryptoError.malformedCiphertext, CryptoError.invalidKeySize {
            throw Failure.corrupt("authentication failed")
        }
    }

    /// The authenticated data of the wrapped item key and of the ciphertext: the same binding, with a
    /// different prefix so neither can stand for the other.
    private static func associatedData(part: Part, identity: Data, itemClass: ItemClass, protection: ProtectionClass)
        -> (wrap: Data, content: Data)
    {
        var binding = Data(capacity: 48)
        binding.append(contentsOf: "swift-keychain item v1".utf8)
        binding.append(part.rawValue)
        binding.append(UInt8(itemClass.rawValue))
        binding.append(UInt8(protection.rawValue))
        binding.append(identity)
        var wrap = Data(capacity: binding.count + 4)
        wrap.append(contentsOf: "wrap".utf8)
        wrap.append(binding)
        return (wrap, binding)
    }
}
