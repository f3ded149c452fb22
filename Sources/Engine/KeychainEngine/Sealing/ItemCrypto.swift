import Foundation
import KeychainBytes
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
///
/// The binding also covers the row's lookup digest and its synchronizable and tombstone flags: a blob
/// that opens proves the row's class primary key, access group and flags are the ones it was sealed
/// with, which lets a lookup by primary key read the secret without opening the attributes.
enum ItemCrypto {
    static let blobVersion: UInt8 = 1

    enum Part: UInt8 {
        case metadata = 1
        case secret = 2
    }

    enum Failure: Error {
        /// The blob does not open: tampered, moved, truncated, or made with another key.
        case corrupt(String)
        /// A guarded blob was opened without its factors.
        case needsFactors
        /// A guarded blob did not open with the factors given.
        case factorsRejected
    }

    /// The secret blob of an item whose access control guards it: `version (2) ‖ salt (16) ‖ wrapped item
    /// key ‖ sealed plaintext`, the plaintext sealed under a key derived from the item key, the salt and
    /// the factors' secrets (`SecretFactors`), so the blob opens only with them; a blob whose version
    /// byte is changed no longer opens either way.
    static let guardedBlobVersion: UInt8 = 2

    static func seal(
        _ plaintext: Data, part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors? = nil
    ) throws -> Data {
        try seal(part: part, binding: binding, classKey: classKey, factors: factors) { key, aad in
            try AESGCM.seal(plaintext, key: key, authenticating: aad)
        }
    }

    /// A secret's blob, sealed from wiped memory.
    static func seal(
        _ plaintext: SecureBytes, part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors? = nil
    ) throws -> Data {
        try seal(part: part, binding: binding, classKey: classKey, factors: factors) { key, aad in
            try AESGCM.seal(plaintext, key: key, authenticating: aad)
        }
    }

    private static func seal(
        part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors?,
        content: (SecureBytes, Data) throws -> Data
    ) throws -> Data {
        let itemKey = try SecureBytes(randomCount: AESGCM.keySize)
        let (wrapAAD, aad) = associatedData(part: part, binding: binding)
        let salt = factors == nil ? nil : try Random.bytes(16)
        var writer = ByteWriter()
        writer.write(salt == nil ? blobVersion : guardedBlobVersion)
        if let salt { writer.writeRaw(salt) }
        writer.writeBytes(try AESGCM.seal(itemKey, key: classKey, authenticating: wrapAAD))
        var contentKey = itemKey
        if let factors, let salt { contentKey = try factors.contentKey(itemKey: itemKey, salt: salt) }
        writer.writeRaw(try content(contentKey, aad))
        return writer.data
    }

    /// Whether a blob is guarded (opens only with its factors).
    static func isGuarded(_ blob: Data) -> Bool { blob.first == guardedBlobVersion }

    static func open(
        _ blob: Data, part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors? = nil
    ) throws -> Data {
        try open(blob, part: part, binding: binding, classKey: classKey, factors: factors) { sealed, key, aad in
            try AESGCM.open(sealed, key: key, authenticating: aad)
        }
    }

    /// A secret's blob, opened into wiped memory.
    static func openSecret(
        _ blob: Data, part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors? = nil
    ) throws -> SecureBytes {
        try open(blob, part: part, binding: binding, classKey: classKey, factors: factors) { sealed, key, aad in
            try AESGCM.openSecure(sealed, key: key, authenticating: aad)
        }
    }

    private static func open<Plaintext>(
        _ blob: Data, part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors?,
        content: (Data, SecureBytes, Data) throws -> Plaintext
    ) throws -> Plaintext {
        let (salt, wrappedKey, sealed) = try parts(of: blob)
        let (wrapAAD, aad) = associatedData(part: part, binding: binding)
        do {
            let itemKey = try AESGCM.openSecure(wrappedKey, key: classKey, authenticating: wrapAAD)
            guard let salt else { return try content(sealed, itemKey, aad) }
            guard let factors else { throw Failure.needsFactors }
            return try content(sealed, try factors.contentKey(itemKey: itemKey, salt: salt), aad)
        } catch CryptoError.authenticationFailed, CryptoError.malformedCiphertext, CryptoError.invalidKeySize {
            // A guarded blob that does not open with its factors: a changed enrollment or a wrong
            // application password, or tampering; callers tell them apart by what the item requires.
            throw salt == nil ? Failure.corrupt("authentication failed") : Failure.factorsRejected
        }
    }

    /// A blob's salt (a guarded blob's only), wrapped item key and sealed content.
    private static func parts(of blob: Data) throws -> (salt: Data?, wrappedKey: Data, sealed: Data) {
        var reader = ByteReader(blob)
        let version = try? reader.read() as UInt8
        let salt = version == guardedBlobVersion ? try? reader.readRaw(16) : nil
        guard version == blobVersion || salt != nil, let wrappedKey = try? reader.readBytes(),
            let sealed = try? reader.readRaw(reader.remaining)
        else { throw Failure.corrupt("malformed blob") }
        return (salt, wrappedKey, sealed)
    }

    /// The same blob with its item key wrapped by `newClassKey` instead of `classKey`: the sealed
    /// content is kept byte for byte, so a guarded blob moves without its factors (a migration to new
    /// class keys). Throws `Failure.corrupt` when the item key does not open under `classKey`.
    static func rewrap(
        _ blob: Data, part: Part, binding: RowBinding, classKey: SecureBytes, newClassKey: SecureBytes
    ) throws -> Data {
        let (salt, wrappedKey, sealed) = try parts(of: blob)
        let (wrapAAD, _) = associatedData(part: part, binding: binding)
        let itemKey: SecureBytes
        do {
            itemKey = try AESGCM.openSecure(wrappedKey, key: classKey, authenticating: wrapAAD)
        } catch CryptoError.authenticationFailed, CryptoError.malformedCiphertext {
            throw Failure.corrupt("authentication failed")
        }
        var writer = ByteWriter()
        writer.write(salt == nil ? blobVersion : guardedBlobVersion)
        if let salt { writer.writeRaw(salt) }
        writer.writeBytes(try AESGCM.seal(itemKey, key: newClassKey, authenticating: wrapAAD))
        writer.writeRaw(sealed)
        return writer.data
    }

    /// The authenticated data of the wrapped item key and of the ciphertext: the same binding, with a
    /// different prefix so neither can stand for the other.
    private static func associatedData(part: Part, binding: RowBinding) -> (wrap: Data, content: Data) {
        // Built once as bytes: the content binding is the wrap binding without its "wrap" prefix.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32 + binding.identity.count + binding.lookupDigest.count)
        bytes.append(contentsOf: Self.wrapPrefix)
        bytes.append(contentsOf: Self.domain)
        bytes.append(part.rawValue)
        bytes.append(UInt8(binding.itemClass.rawValue))
        bytes.append(UInt8(binding.protection.rawValue))
        bytes.append(binding.synchronizable ? 1 : 0)
        bytes.append(binding.tombstone ? 1 : 0)
        bytes.append(contentsOf: binding.identity)
        bytes.append(contentsOf: binding.lookupDigest)
        let wrap = Data(bytes)
        return (wrap, wrap.dropFirst(Self.wrapPrefix.count))
    }

    private static let wrapPrefix = Array("wrap".utf8)
    private static let domain = Array("swift-keychain item v1".utf8)
}
