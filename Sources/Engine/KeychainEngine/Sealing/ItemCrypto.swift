import FoundationEssentials
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

    /// A guarded secret brought from another keychain (a restored backup): `version (3) ‖ salt (16) ‖
    /// wrapped item key ‖ content context (bytes) ‖ sealed plaintext`. Its content was sealed under the
    /// binding of the row it came from, which names that keychain's keyed lookup digest and cannot be
    /// re-sealed here without the factors; so the authenticated data it was sealed under travels with
    /// it. The row binds it all the same: its item key is wrapped under this row's binding, and the
    /// content key is derived from that item key.
    static let carriedBlobVersion: UInt8 = 3

    /// A guarded secret taken out of its row without its factors, for a backup: the item key (opened
    /// with the class key), the salt, the authenticated data the content was sealed under, and the
    /// sealed content as it is. Whoever holds it needs the factors its content key was derived from,
    /// and only those: a backup carries it only when they are every requirement of the access control
    /// (`Keychain.travelsSealed`).
    struct CarriedSecret {
        var salt: Data
        var itemKey: SecureBytes
        var context: Data
        var sealed: Data
    }

    /// - Parameter nonces: where the two nonces come from (the row's blobs share one batch).
    static func seal(
        _ plaintext: Data, part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors? = nil,
        nonces: inout NonceBatch
    ) throws -> Data {
        try seal(part: part, binding: binding, classKey: classKey, factors: factors, nonces: &nonces) {
            key, aad, nonces in
            try AESGCM.seal(plaintext, key: key, authenticating: aad, nonces: &nonces)
        }
    }

    /// A secret's blob, sealed from wiped memory.
    static func seal(
        _ plaintext: SecureBytes, part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors? = nil,
        nonces: inout NonceBatch
    ) throws -> Data {
        try seal(part: part, binding: binding, classKey: classKey, factors: factors, nonces: &nonces) {
            key, aad, nonces in
            try AESGCM.seal(plaintext, key: key, authenticating: aad, nonces: &nonces)
        }
    }

    private static func seal(
        part: Part, binding: RowBinding, classKey: SecureBytes, factors: SecretFactors?, nonces: inout NonceBatch,
        content: (SecureBytes, Data, inout NonceBatch) throws -> Data
    ) throws -> Data {
        let itemKey = try SecureBytes(randomCount: AESGCM.keySize)
        let (wrapAAD, aad) = associatedData(part: part, binding: binding)
        let salt = factors == nil ? nil : try Random.bytes(16)
        let wrappedKey = try AESGCM.seal(itemKey, key: classKey, authenticating: wrapAAD, nonces: &nonces)
        var contentKey = itemKey
        if let factors, let salt { contentKey = try factors.contentKey(itemKey: itemKey, salt: salt) }
        return Parts(
            version: salt == nil ? blobVersion : guardedBlobVersion, salt: salt, wrappedKey: wrappedKey, context: nil,
            sealed: try content(contentKey, aad, &nonces)
        ).encoded
    }

    /// The first bytes (format versions) of guarded blobs.
    static let guardedFormats = [guardedBlobVersion, carriedBlobVersion]

    /// Whether a blob is guarded (opens only with its factors).
    static func isGuarded(_ blob: Data) -> Bool { blob.first.map(guardedFormats.contains) ?? false }

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
        let blob = try parts(of: blob)
        let (wrapAAD, bindingAAD) = associatedData(part: part, binding: binding)
        let aad = blob.context ?? bindingAAD
        let salt = blob.salt
        do {
            let itemKey = try AESGCM.openSecure(blob.wrappedKey, key: classKey, authenticating: wrapAAD)
            guard let salt else { return try content(blob.sealed, itemKey, aad) }
            guard let factors else { throw Failure.needsFactors }
            return try content(blob.sealed, try factors.contentKey(itemKey: itemKey, salt: salt), aad)
        } catch CryptoError.authenticationFailed, CryptoError.malformedCiphertext, CryptoError.invalidKeySize {
            // A guarded blob that does not open with its factors: a changed enrollment or a wrong
            // application password, or tampering; callers tell them apart by what the item requires.
            throw salt == nil ? Failure.corrupt("authentication failed") : Failure.factorsRejected
        }
    }

    /// A blob taken apart: its salt (a guarded blob's only), wrapped item key, the context its content
    /// was sealed under (a carried blob's only) and sealed content.
    private struct Parts {
        var version: UInt8
        var salt: Data?
        var wrappedKey: Data
        var context: Data?
        var sealed: Data

        /// The blob again: `version ‖ salt? ‖ wrapped key (bytes) ‖ context (bytes)? ‖ sealed`.
        var encoded: Data {
            var writer = ByteWriter()
            writer.write(version)
            if let salt { writer.writeRaw(salt) }
            writer.writeBytes(wrappedKey)
            if let context { writer.writeBytes(context) }
            writer.writeRaw(sealed)
            return writer.data
        }
    }

    /// The item key a blob wraps, opened with the class key under the row's binding; `Failure.corrupt`
    /// when it does not open.
    private static func itemKey(of parts: Parts, wrapAAD: Data, classKey: SecureBytes) throws -> SecureBytes {
        do {
            return try AESGCM.openSecure(parts.wrappedKey, key: classKey, authenticating: wrapAAD)
        } catch CryptoError.authenticationFailed, CryptoError.malformedCiphertext {
            throw Failure.corrupt("authentication failed")
        }
    }

    private static func parts(of blob: Data) throws -> Parts {
        var reader = ByteReader(blob)
        guard let version = try? reader.read() as UInt8,
            [blobVersion, guardedBlobVersion, carriedBlobVersion].contains(version)
        else { throw Failure.corrupt("malformed blob") }
        let salt = version == blobVersion ? nil : try? reader.readRaw(16)
        let wrappedKey = try? reader.readBytes()
        let context = version == carriedBlobVersion ? try? reader.readBytes() : nil
        guard version == blobVersion || salt != nil, let wrappedKey, version != carriedBlobVersion || context != nil,
            let sealed = try? reader.readRaw(reader.remaining)
        else { throw Failure.corrupt("malformed blob") }
        return Parts(version: version, salt: salt, wrappedKey: wrappedKey, context: context, sealed: sealed)
    }

    /// A guarded secret's blob taken apart for a backup: its item key opened with the class key, its
    /// content left sealed under the factors. Throws `Failure.corrupt` for a blob that is not guarded
    /// or does not open.
    static func carry(_ blob: Data, part: Part, binding: RowBinding, classKey: SecureBytes) throws -> CarriedSecret {
        let parts = try parts(of: blob)
        guard let salt = parts.salt else { throw Failure.corrupt("not a guarded blob") }
        let (wrapAAD, bindingAAD) = associatedData(part: part, binding: binding)
        return CarriedSecret(
            salt: salt, itemKey: try itemKey(of: parts, wrapAAD: wrapAAD, classKey: classKey),
            context: parts.context ?? bindingAAD, sealed: parts.sealed)
    }

    /// A carried guarded secret sealed into a row of this keychain: its item key wrapped under this
    /// row's binding and class key, its content as it came.
    static func seal(carried: CarriedSecret, part: Part, binding: RowBinding, classKey: SecureBytes) throws -> Data {
        guard carried.salt.count == 16, carried.itemKey.count == AESGCM.keySize else {
            throw Failure.corrupt("a carried secret of the wrong shape")
        }
        let (wrapAAD, _) = associatedData(part: part, binding: binding)
        return Parts(
            version: carriedBlobVersion, salt: carried.salt,
            wrappedKey: try AESGCM.seal(carried.itemKey, key: classKey, authenticating: wrapAAD),
            context: carried.context, sealed: carried.sealed
        ).encoded
    }

    /// The same blob with its item key wrapped by `newClassKey` instead of `classKey`: the sealed
    /// content is kept byte for byte, so a guarded blob moves without its factors (a migration to new
    /// class keys). Throws `Failure.corrupt` when the item key does not open under `classKey`.
    static func rewrap(
        _ blob: Data, part: Part, binding: RowBinding, classKey: SecureBytes, newClassKey: SecureBytes
    ) throws -> Data {
        var parts = try parts(of: blob)
        let (wrapAAD, _) = associatedData(part: part, binding: binding)
        let itemKey = try itemKey(of: parts, wrapAAD: wrapAAD, classKey: classKey)
        parts.wrappedKey = try AESGCM.seal(itemKey, key: newClassKey, authenticating: wrapAAD)
        return parts.encoded
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
