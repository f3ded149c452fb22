import Foundation
import KeychainBytes
import KeychainCrypto

/// A device's signed statement of the records it writes in one push: for each, its id, the version
/// it becomes, whether it is a tombstone, and the SHA-256 of its ciphertext. The server stores the
/// statement beside the change log, and every device checks it against the writer's key before it
/// applies a record: the server cannot forge, alter or reattribute a write.
///
/// It also names the writer's **base**: how far it had read the log when it wrote, and its hash chain
/// there. The server places the batch after that position, so a reader knows the batch cannot
/// stand at or before it (a server that left a batch out and renumbered the rest is found out), and
/// compares the chain with its own there (a server that showed the writer another history is found
/// out as soon as the reader meets one of the writer's batches).
///
///     domain ‖ account (16) ‖ writer id (16) ‖ base (8) ‖ base chain (32)
///            ‖ entries: record id (16) ‖ version (8) ‖ deleted (1) ‖ hash (32)
public struct SyncBatch: SignedSyncStatement, Equatable {
    public static let maximumEntries = 2_000
    static let domain = Data("swift-keychain sync batch v2\u{0}".utf8)

    public struct Entry: Sendable, Equatable {
        public var recordID: Data
        public var version: Int64
        public var deleted: Bool
        public var ciphertextHash: Data

        public init(recordID: Data, version: Int64, deleted: Bool, ciphertextHash: Data) {
            self.recordID = recordID
            self.version = version
            self.deleted = deleted
            self.ciphertextHash = ciphertextHash
        }

        /// record id (16) ‖ version (8) ‖ deleted (1) ‖ hash (32), as batches and checkpoints carry it.
        func encode(into writer: inout ByteWriter) {
            writer.writeBytes(recordID)
            writer.write(version)
            writer.write(deleted)
            writer.writeBytes(ciphertextHash)
        }

        static func decode(from reader: inout SyncReader, in what: String) throws(SyncError) -> Entry {
            let id = try reader.fixed(16)
            let version = try reader.signed()
            let deleted = try reader.boolean()
            let hash = try reader.fixed(32)
            guard version > 0, UInt64(version) < TrustView.bound else {
                throw SyncError(.malformed, "\(what) names a version out of bounds")
            }
            return Entry(recordID: id, version: version, deleted: deleted, ciphertextHash: hash)
        }
    }

    public var account: Data
    public var writer: Data
    public var signerID: Data { writer }
    /// The last sequence number the writer had read when it wrote this batch (0: none).
    public var base: Int64
    /// The writer's hash chain at `base` (`SyncHead.origin` at 0).
    public var baseChain: Data
    public var entries: [Entry]
    public var signature: Data

    public init(
        account: Data, writer: Data, base: Int64 = 0, baseChain: Data = SyncHead.origin, entries: [Entry],
        signature: Data = Data()
    ) {
        self.account = account
        self.writer = writer
        self.base = base
        self.baseChain = baseChain
        self.entries = entries
        self.signature = signature
    }

    public var body: Data {
        var writer = ByteWriter(capacity: 64 + entries.count * 70)
        writer.writeRaw(Self.domain)
        writer.writeBytes(account)
        writer.writeBytes(self.writer)
        writer.write(base)
        writer.writeBytes(baseChain)
        writer.writeCount(entries.count)
        for entry in entries { entry.encode(into: &writer) }
        return writer.data
    }

    public static func decode(_ data: Data) throws(SyncError) -> SyncBatch {
        var (reader, _, signature) = try SignedStatement.open(
            data, domain: domain, maximumBody: 1 << 20, what: "a signed batch")
        let account = try reader.fixed(16)
        let writer = try reader.fixed(SyncDevice.idSize)
        let base = try reader.signed()
        let baseChain = try reader.fixed(32)
        guard base >= 0, UInt64(base) < TrustView.bound else {
            throw SyncError(.malformed, "a signed batch's base is out of bounds")
        }
        let count = try reader.count(max: maximumEntries)
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count { entries.append(try Entry.decode(from: &reader, in: "a signed batch")) }
        try reader.end()
        return SyncBatch(
            account: account, writer: writer, base: base, baseChain: baseChain, entries: entries, signature: signature)
    }

}

/// A device's signed position in the account's log: the hash chain over every entry up to `seq`,
/// as it saw them, and the trust view it holds. Another device at or past `seq` compares the chain
/// with its own: a difference means the server showed the two different histories (a fork, or a
/// record withheld from one of them).
///
///     chain(n) = SHA-256("swift-keychain sync chain v1" ‖ chain(n-1) ‖ n ‖ writer ‖ record id ‖ version ‖ deleted ‖ hash)
public struct SyncHead: SignedSyncStatement, Equatable {
    static let domain = Data("swift-keychain sync head v1\u{0}".utf8)
    public static let origin = Data(count: 32)

    public var account: Data
    public var device: Data
    public var signerID: Data { device }
    public var seq: Int64
    public var chain: Data
    public var viewEpoch: UInt64
    public var viewHash: Data
    public var signature: Data

    public init(
        account: Data, device: Data, seq: Int64, chain: Data, viewEpoch: UInt64, viewHash: Data,
        signature: Data = Data()
    ) {
        self.account = account
        self.device = device
        self.seq = seq
        self.chain = chain
        self.viewEpoch = viewEpoch
        self.viewHash = viewHash
        self.signature = signature
    }

    public static func chain(_ previous: Data, seq: Int64, writer: Data, entry: SyncBatch.Entry) -> Data {
        var writer2 = ByteWriter(capacity: 160)
        writer2.writeRaw(Data("swift-keychain sync chain v1".utf8))
        writer2.writeRaw(previous)
        writer2.write(seq)
        writer2.writeRaw(writer)
        writer2.writeRaw(entry.recordID)
        writer2.write(entry.version)
        writer2.write(entry.deleted)
        writer2.writeRaw(entry.ciphertextHash)
        return (try? Digest.sha256(writer2.data)) ?? Data(count: 32)
    }

    public var body: Data {
        var writer = ByteWriter()
        writer.writeRaw(Self.domain)
        writer.writeBytes(account)
        writer.writeBytes(device)
        writer.write(seq)
        writer.writeBytes(chain)
        writer.write(viewEpoch)
        writer.writeBytes(viewHash)
        return writer.data
    }

    public static func decode(_ data: Data) throws(SyncError) -> SyncHead {
        var (reader, _, signature) = try SignedStatement.open(
            data, domain: domain, maximumBody: 1024, what: "a device head")
        let head = SyncHead(
            account: try reader.fixed(16), device: try reader.fixed(SyncDevice.idSize), seq: try reader.signed(),
            chain: try reader.fixed(32), viewEpoch: try reader.unsigned(), viewHash: try reader.fixed(32),
            signature: signature)
        try reader.end()
        guard head.seq >= 0, UInt64(head.seq) < TrustView.bound, head.viewEpoch < TrustView.bound else {
            throw SyncError(.malformed, "a device head's position is out of bounds")
        }
        return head
    }

}

/// A zone key of one generation, sealed to one device's encryption key (ECIES, X9.63 SHA-256,
/// AES-GCM) and signed by the device that shared it, as CKKS's TLK shares are.
///
///     domain ‖ account (16) ‖ recipient (16) ‖ sender (16) ‖ generation (8) ‖ sealed key
public struct ZoneKeyShare: SignedSyncStatement, Equatable {
    static let domain = Data("swift-keychain sync zone key share v1\u{0}".utf8)
    static let scheme = ECIESScheme(hash: .sha256, variableIV: true)

    public var account: Data
    public var recipient: Data
    public var sender: Data
    public var signerID: Data { sender }
    public var generation: UInt64
    public var sealed: Data
    public var signature: Data

    public var body: Data {
        var writer = ByteWriter()
        writer.writeRaw(Self.domain)
        writer.writeBytes(account)
        writer.writeBytes(recipient)
        writer.writeBytes(sender)
        writer.write(generation)
        writer.writeBytes(sealed)
        return writer.data
    }

    public static func make(
        zoneKey: SecureBytes, generation: UInt64, account: Data, to recipient: SyncDevice, from keys: SyncDeviceKeys
    ) throws(SyncError) -> ZoneKeyShare {
        let sealed: Data
        do {
            let key = try AsymmetricKey.importing(recipient.encryptionKey, kind: .ec, isPrivate: false)
            sealed = try zoneKey.withUnsafeBytes { try key.eciesEncrypt(Data($0), scheme) }
        } catch {
            throw SyncError(.invalid, "cannot seal a zone key to device \(Hex.encode(recipient.id))")
        }
        let share = ZoneKeyShare(
            account: account, recipient: recipient.id, sender: keys.device.id, generation: generation, sealed: sealed,
            signature: Data())
        return try share.signed(by: keys)
    }

    /// The zone key, when `sender` signed the share and it opens with `keys`.
    public func open(with keys: SyncDeviceKeys, sender device: SyncDevice) throws(SyncError) -> SecureBytes {
        guard recipient == keys.device.id, isSigned(by: device) else {
            throw SyncError(.forged, "a zone key share is not signed by the device it names")
        }
        let key: SecureBytes
        do { key = try keys.decrypt(sealed, Self.scheme) } catch  where error.code == .forged {
            throw SyncError(.forged, "a zone key share does not open with this device's key")
        }
        guard key.count == 32 else { throw SyncError(.forged, "a zone key share holds no 32-byte key") }
        return key
    }

    public static func decode(_ data: Data) throws(SyncError) -> ZoneKeyShare {
        var (reader, _, signature) = try SignedStatement.open(
            data, domain: domain, maximumBody: 4096, what: "a zone key share")
        let share = ZoneKeyShare(
            account: try reader.fixed(16), recipient: try reader.fixed(SyncDevice.idSize),
            sender: try reader.fixed(SyncDevice.idSize), generation: try reader.unsigned(),
            sealed: try reader.bytes(max: 1024), signature: signature)
        try reader.end()
        guard share.generation < TrustView.bound else {
            throw SyncError(.malformed, "a zone key share's generation is out of bounds")
        }
        return share
    }
}
