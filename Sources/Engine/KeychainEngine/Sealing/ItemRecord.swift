import FoundationEssentials
import KeychainBytes
import KeychainCrypto
import KeychainKeybag

/// An item in the clear, as it exists only in memory between decryption and the answer.
struct ItemRecord: Sendable {
    var itemClass: ItemClass
    var persistentID: Data
    var protection: ProtectionClass
    var accessGroup: String
    var synchronizable: Bool
    var tombstone: Bool
    /// Class attributes (and cdat/mdat), normalized.
    var attributes: [String: ItemValue]
    var accessControl: AccessControlPolicy?
    /// For an access control that names `biometryCurrentSet` as one alternative among others: the
    /// domain state of the set enrolled when the item was made (zeros when none was), so that a set
    /// enrolled later never satisfies that alternative. (Where every alternative needs the set, the
    /// item is bound to it by cryptography instead.)
    var biometryBinding: Data? = nil
    /// The secret (`kSecValueData`); nil when the item was stored without one. For an enclave key,
    /// the private key wrapped by the device root, which never leaves the engine.
    var secret: SecureBytes?
    /// An enclave key's public key (X9.63): what reads give as its data, without opening the secret.
    var enclavePublicKey: Data? = nil

    var modificationDate: Date {
        if case .date(let date) = attributes["mdat"] { return date }
        return Date(timeIntervalSinceReferenceDate: 0)
    }

    /// The attributes dictionary Apple's API returns: stored attributes plus the managed ones.
    func publicAttributes() throws -> [String: ItemValue] {
        var result = attributes
        result["agrp"] = .string(accessGroup)
        result["pdmn"] = .string(protection.attributeValue)
        result["sync"] = .integer(synchronizable ? 1 : 0)
        result["tomb"] = .integer(tombstone ? 1 : 0)
        result["musr"] = .data(Data())
        if let accessControl { result["accc"] = .accessControl(accessControl) }
        return result
    }

    /// Sets `sha1` (Apple's `kSecAttrSHA1`): SHA-1 over the other attributes and the (unguarded) secret. It is kept
    /// only inside the sealed metadata and as a keyed digest, never in clear.
    mutating func updateDigest() throws {
        attributes["sha1"] = nil
        var writer = ValueWriter()
        writer.string(accessGroup)
        writer.protection(protection)
        writer.byte(synchronizable ? 1 : 0)
        writer.dictionary(attributes)
        // A guarded secret stays out: its digest would be returned and searchable without the user,
        // letting anyone in the group test guesses of the secret (and skip an application password's
        // scrypt). So for such items `sha1` covers the attributes alone.
        // An enclave key's stands for its secret: what a read gives as its data, so that a client can
        // recompute it, and nothing derived from the wrapped private key.
        if accessControl?.guardsSecret != true {
            if let enclavePublicKey {
                writer.bytes(enclavePublicKey)
            } else if let secret {
                writer.secret(secret)
            } else {
                writer.bytes(Data())
            }
        }
        // The digest's input holds the secret: it is hashed from wiped memory.
        let input = writer.takeSecure()
        attributes["sha1"] = .data(try input.withUnsafeBytes { try Digest.sha1($0) })
    }
}

/// The plaintext formats inside the two sealed blobs: metadata (everything but the secret) and secret,
/// in the vocabulary's one encoding.
///
///     metadata: version (1) ‖ access group ‖ synchronizable ‖ tombstone ‖ access control (0; 1 ‖ policy;
///               2 ‖ policy ‖ biometry binding) ‖ attributes (a dictionary) ‖ sections (tag ‖ bytes)…
///     secret:   version (1) ‖ optional secret
enum ItemRecordCoding {
    static let version: UInt8 = 1

    /// Tags of the metadata's optional sections, each at most once.
    enum Section: UInt8 {
        case enclavePublicKey = 1
    }

    /// How the access control is present.
    private enum AccessControlMarker: UInt8 {
        case none = 0
        case policy = 1
        case policyAndBiometryBinding = 2
    }

    static func encodeMetadata(_ record: ItemRecord) -> Data {
        var writer = ValueWriter()
        writer.byte(version)
        writer.string(record.accessGroup)
        writer.flag(record.synchronizable)
        writer.flag(record.tombstone)
        if let accessControl = record.accessControl {
            let marker: AccessControlMarker = record.biometryBinding == nil ? .policy : .policyAndBiometryBinding
            writer.byte(marker.rawValue)
            writer.accessControl(accessControl)
            if let binding = record.biometryBinding { writer.bytes(binding) }
        } else {
            writer.byte(AccessControlMarker.none.rawValue)
        }
        writer.dictionary(record.attributes)
        if let publicKey = record.enclavePublicKey {
            writer.byte(Section.enclavePublicKey.rawValue)
            writer.bytes(publicKey)
        }
        return writer.data
    }

    struct Metadata {
        var accessGroup: String
        var synchronizable: Bool
        var tombstone: Bool
        var accessControl: AccessControlPolicy?
        var biometryBinding: Data?
        var attributes: [String: ItemValue]
        var enclavePublicKey: Data?
    }

    /// The access control alone, read from the start of the metadata without its attributes: what a
    /// copy of the row (a backup) needs to know of an item that cannot be a token's.
    static func decodeAccessControl(_ data: Data) throws(FormatError) -> AccessControlPolicy? {
        var reader = ValueReader(data, limits: .authenticated)
        guard try reader.byte() == version else { throw FormatError("an item record of another version") }
        _ = try reader.string()
        _ = try reader.flag()
        _ = try reader.flag()
        switch AccessControlMarker(rawValue: try reader.byte()) {
        case .none?: return nil
        case .policy?, .policyAndBiometryBinding?: return try reader.accessControl()
        case nil: throw FormatError("an unknown access-control marker")
        }
    }

    static func decodeMetadata(_ data: Data) throws(FormatError) -> Metadata {
        var reader = ValueReader(data, limits: .authenticated)
        guard try reader.byte() == version else { throw FormatError("an item record of another version") }
        let accessGroup = try reader.string()
        let synchronizable = try reader.flag()
        let tombstone = try reader.flag()
        var accessControl: AccessControlPolicy?
        var biometryBinding: Data?
        switch AccessControlMarker(rawValue: try reader.byte()) {
        case .none?: break
        case .policy?: accessControl = try reader.accessControl()
        case .policyAndBiometryBinding?:
            accessControl = try reader.accessControl()
            biometryBinding = try reader.bytes()
        case nil: throw FormatError("an unknown access-control marker")
        }
        let attributes = try reader.dictionary()
        // Optional sections, each once: a tag this build does not know makes the item corrupt rather
        // than half-read (a re-seal would drop it).
        var enclavePublicKey: Data?
        while !reader.isAtEnd {
            guard Section(rawValue: try reader.byte()) == .enclavePublicKey, enclavePublicKey == nil else {
                throw FormatError("an unknown or repeated section")
            }
            enclavePublicKey = try reader.bytes()
        }
        return Metadata(
            accessGroup: accessGroup, synchronizable: synchronizable, tombstone: tombstone,
            accessControl: accessControl, biometryBinding: biometryBinding, attributes: attributes,
            enclavePublicKey: enclavePublicKey)
    }

    /// The secret's plaintext format, in wiped memory (it goes straight to the seal).
    static func encodeSecret(_ secret: SecureBytes?) -> SecureBytes {
        var writer = ValueWriter()
        writer.byte(version)
        writer.optional(secret) { $0.secret($1) }
        return writer.takeSecure()
    }

    /// The secret from its opened plaintext, read where it lies: the reader views the wiped buffer,
    /// and the secret is copied only into wiped memory.
    static func decodeSecret(_ plaintext: SecureBytes) throws(FormatError) -> SecureBytes? {
        try plaintext.withBorrowedData { (data) throws(FormatError) -> SecureBytes? in
            var reader = ValueReader(data, limits: .authenticated)
            guard try reader.byte() == version else { throw FormatError("an item secret of another version") }
            let secret = try reader.optional { (reader) throws(FormatError) in try reader.secret() }
            try reader.finish()
            return secret
        }
    }
}
