import Foundation
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
    var secret: Data?
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
        var writer = ByteWriter()
        writer.writeString(accessGroup)
        writer.writeString(protection.attributeValue)
        writer.write(UInt8(synchronizable ? 1 : 0))
        ItemRecordCoding.writeAttributes(self, into: &writer)
        // A guarded secret stays out: its digest would be returned and searchable without the user,
        // letting anyone in the group test guesses of the secret (and skip an application password's
        // scrypt). So for such items `sha1` covers the attributes alone.
        // An enclave key's stands for its secret: what a read gives as its data, so that a client can
        // recompute it, and nothing derived from the wrapped private key.
        if accessControl?.guardsSecret != true { writer.writeBytes(enclavePublicKey ?? secret ?? Data()) }
        attributes["sha1"] = .data(try Digest.sha1(writer.data))
    }
}

/// The plaintext formats inside the two sealed blobs: metadata (everything but the secret) and secret.
enum ItemRecordCoding {
    static let version: UInt8 = 1

    static func encodeMetadata(_ record: ItemRecord) -> Data {
        var writer = ByteWriter()
        writer.write(version)
        writer.writeString(record.accessGroup)
        writer.write(UInt8(record.synchronizable ? 1 : 0))
        writer.write(UInt8(record.tombstone ? 1 : 0))
        if let accessControl = record.accessControl {
            writer.write(UInt8(record.biometryBinding == nil ? 1 : 2))
            writer.writeString(accessControl.protection.attributeValue)
            writer.write(UInt64(accessControl.flags))
            if let binding = record.biometryBinding { writer.writeBytes(binding) }
        } else {
            writer.write(UInt8(0))
        }
        writeAttributes(record, into: &writer)
        // Sections that only some items have follow, each a tag and its bytes (none: nothing more).
        if let publicKey = record.enclavePublicKey {
            writer.write(UInt8(1))
            writer.writeBytes(publicKey)
        }
        return writer.data
    }

    static func writeAttributes(_ record: ItemRecord, into writer: inout ByteWriter) {
        let names = record.attributes.keys.sorted()
        writer.write(UInt32(names.count))
        for name in names {
            guard let value = record.attributes[name] else { continue }
            writer.writeString(name)
            writeValue(value, into: &writer)
        }
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

    static func decodeMetadata(_ data: Data) throws(ByteReader.Truncated) -> Metadata {
        var reader = ByteReader(data)
        guard try reader.read() as UInt8 == version else { throw ByteReader.Truncated() }
        let accessGroup = try reader.readString()
        let synchronizable = try reader.read() as UInt8 == 1
        let tombstone = try reader.read() as UInt8 == 1
        var accessControl: AccessControlPolicy?
        var biometryBinding: Data?
        let marker: UInt8 = try reader.read()
        if marker == 1 || marker == 2 {
            let name = try reader.readString()
            let flags: UInt64 = try reader.read()
            guard let protection = ProtectionClass(attributeValue: name) else { throw ByteReader.Truncated() }
            accessControl = AccessControlPolicy(protection: protection, flags: UInt(flags))
            if marker == 2 { biometryBinding = try reader.readBytes() }
        } else if marker != 0 {
            throw ByteReader.Truncated()
        }
        let count: UInt32 = try reader.read()
        guard Int(count) <= reader.remaining else { throw ByteReader.Truncated() }
        var attributes: [String: ItemValue] = [:]
        for _ in 0..<count {
            let name = try reader.readString()
            attributes[name] = try readValue(&reader)
        }
        // Optional sections, each once: a tag this build does not know makes the item corrupt rather
        // than half-read (a re-seal would drop it).
        var enclavePublicKey: Data?
        while !reader.isAtEnd {
            let tag: UInt8 = try reader.read()
            guard tag == 1, enclavePublicKey == nil else { throw ByteReader.Truncated() }
            enclavePublicKey = try reader.readBytes()
        }
        return Metadata(
            accessGroup: accessGroup, synchronizable: synchronizable, tombstone: tombstone,
            accessControl: accessControl, biometryBinding: biometryBinding, attributes: attributes,
            enclavePublicKey: enclavePublicKey)
    }

    static func encodeSecret(_ secret: Data?) -> Data {
        var writer = ByteWriter()
        writer.write(version)
        if let secret {
            writer.write(UInt8(1))
            writer.writeBytes(secret)
        } else {
            writer.write(UInt8(0))
        }
        return writer.data
    }

    static func decodeSecret(_ data: Data) throws(ByteReader.Truncated) -> Data? {
        var reader = ByteReader(data)
        guard try reader.read() as UInt8 == version else { throw ByteReader.Truncated() }
        let present = try reader.read() as UInt8 == 1
        let secret = present ? try reader.readBytes() : nil
        guard reader.isAtEnd else { throw ByteReader.Truncated() }
        return secret
    }

    private static func writeValue(_ value: ItemValue, into writer: inout ByteWriter) {
        switch value {
        case .string(let string):
            writer.write(UInt8(1))
            writer.writeString(string)
        case .data(let data):
            writer.write(UInt8(2))
            writer.writeBytes(data)
        case .integer(let number):
            writer.write(UInt8(3))
            writer.write(number)
        case .double(let number):
            writer.write(UInt8(4))
            writer.write(number)
        case .date(let date):
            writer.write(UInt8(5))
            writer.write(date.timeIntervalSinceReferenceDate)
        case .bool(let flag):
            writer.write(UInt8(6))
            writer.write(UInt8(flag ? 1 : 0))
        default:
            // Normalization admits only the kinds above into stored attributes.
            writer.write(UInt8(0))
        }
    }

    private static func readValue(_ reader: inout ByteReader) throws(ByteReader.Truncated) -> ItemValue {
        switch try reader.read() as UInt8 {
        case 1: return .string(try reader.readString())
        case 2: return .data(try reader.readBytes())
        case 3: return .integer(try reader.read())
        case 4: return .double(try reader.read())
        case 5: return .date(Date(timeIntervalSinceReferenceDate: try reader.read()))
        case 6: return .bool(try reader.read() as UInt8 == 1)
        case 0: return .null
        default: throw ByteReader.Truncated()
        }
    }
}
