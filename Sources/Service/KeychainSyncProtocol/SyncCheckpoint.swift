import Foundation
import KeychainBytes

/// A trusted device's signed statement of the account at one position of its log: the chain there,
/// and every record as the log left it by then (its version, writer, tombstone flag and ciphertext
/// hash). The server may then drop the log up to that position (compaction); a device that joins
/// later starts from the newest checkpoint instead of the log's beginning, and checks each record it
/// takes against it.
///
///     domain ‖ account (16) ‖ signer (16) ‖ seq (8) ‖ chain (32) ‖ view epoch (8) ‖ view hash (32)
///            ‖ entries: record id (16) ‖ version (8) ‖ deleted (1) ‖ hash (32)
///
/// (A record's writer is in its ciphertext, which the hash covers.)
public struct SyncCheckpoint: SignedSyncStatement, Equatable {
    /// So that a checkpoint (about 75 bytes an entry) fits in one message.
    public static let maximumEntries = 300_000
    static let domain = Data("swift-keychain sync checkpoint v1\u{0}".utf8)

    public typealias Entry = SyncBatch.Entry

    public var account: Data
    public var signer: Data
    public var signerID: Data { signer }
    public var seq: Int64
    public var chain: Data
    public var viewEpoch: UInt64
    public var viewHash: Data
    public var entries: [Entry]
    public var signature: Data

    public init(
        account: Data, signer: Data, seq: Int64, chain: Data, viewEpoch: UInt64, viewHash: Data, entries: [Entry],
        signature: Data = Data()
    ) {
        self.account = account
        self.signer = signer
        self.seq = seq
        self.chain = chain
        self.viewEpoch = viewEpoch
        self.viewHash = viewHash
        self.entries = entries
        self.signature = signature
    }

    public var body: Data {
        var writer = ByteWriter(capacity: 160 + entries.count * 75)
        writer.writeRaw(Self.domain)
        writer.writeBytes(account)
        writer.writeBytes(signer)
        writer.write(seq)
        writer.writeBytes(chain)
        writer.write(viewEpoch)
        writer.writeBytes(viewHash)
        writer.writeCount(entries.count)
        for entry in entries { entry.encode(into: &writer) }
        return writer.data
    }

    public static func decode(_ data: Data) throws(SyncError) -> SyncCheckpoint {
        var (reader, _, signature) = try SignedStatement.open(
            data, domain: domain, maximumBody: SyncChannel.maximumFrame, what: "a checkpoint")
        let account = try reader.fixed(16)
        let signer = try reader.fixed(SyncDevice.idSize)
        let seq = try reader.signed()
        let chain = try reader.fixed(32)
        let epoch = try reader.unsigned()
        let viewHash = try reader.fixed(32)
        guard seq > 0, UInt64(seq) < TrustView.bound, epoch < TrustView.bound else {
            throw SyncError(.malformed, "a checkpoint's position is out of bounds")
        }
        let count = try reader.count(max: maximumEntries)
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count { entries.append(try Entry.decode(from: &reader, in: "a checkpoint")) }
        try reader.end()
        return SyncCheckpoint(
            account: account, signer: signer, seq: seq, chain: chain, viewEpoch: epoch, viewHash: viewHash,
            entries: entries, signature: signature)
    }

}
