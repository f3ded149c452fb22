import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainEngine
import KeychainStorage
import KeychainSyncProtocol

/// Checkpoints: a trusted device signs, every `checkpointInterval` entries of the log, what the account
/// holds at its position (each record's version and ciphertext hash, and its chain there); the server
/// then drops the log up to where every trusted device has read. A device that joins after starts from
/// the newest checkpoint a device trusted now signed, takes each record it names as the server has it
/// now when its hash is the one signed (a record changed since comes in the log after), and goes on
/// from the checkpoint's position and chain.
extension SyncAgent {
    /// Signs a checkpoint after a sync when the account's newest is this many entries behind.
    func makeCheckpointIfDue(
        _ connection: SyncConnection, _ enrollment: SyncEnrollment, view: TrustView, cursor: Int64, chain: Data,
        newest: Int64
    ) throws {
        guard checkpointInterval > 0, cursor > 0, cursor - newest >= checkpointInterval else { return }
        let entries = try transaction { local in
            try local.ledger.entries().filter { $0.seq <= cursor }.map {
                SyncCheckpoint.Entry(
                    recordID: $0.recordID, version: $0.version, deleted: $0.deleted, ciphertextHash: $0.ciphertextHash)
            }
        }
        guard entries.count <= SyncCheckpoint.maximumEntries else { return }
        let checkpoint = try SyncCheckpoint(
            account: enrollment.account, signer: enrollment.keys.device.id, seq: cursor, chain: chain,
            viewEpoch: view.epoch, viewHash: view.hash,
            entries: entries.sorted { $0.recordID.lexicographicallyPrecedes($1.recordID) }
        ).signed(by: enrollment.keys)
        var body = ByteWriter()
        body.writeBytes(checkpoint.encoded())
        _ = try connection.call(.putCheckpoint, body.data)
    }

    /// Starts a device that has read nothing from the account's newest checkpoint: the log before it
    /// was dropped.
    func startFromCheckpoint(
        _ connection: SyncConnection, _ enrollment: SyncEnrollment, view: TrustView, report: inout SyncReport,
        merge: inout MergeOutcome
    ) throws {
        var answer = SyncReader(try connection.call(.checkpoint), "a checkpoint's answer")
        let bytes = try answer.bytes(max: SyncChannel.maximumFrame)
        let compacted = try answer.signed()
        try answer.end()
        guard !bytes.isEmpty else {
            throw SyncError(.withheld, "the server dropped the account's log but shows no checkpoint")
        }
        let checkpoint = try SyncCheckpoint.decode(bytes)
        guard checkpoint.account == enrollment.account, let signer = view.member(checkpoint.signer),
            checkpoint.isSigned(by: signer)
        else { throw SyncError(.forged, "the account's checkpoint is not signed by a device trusted now") }
        guard checkpoint.seq >= compacted else {
            throw SyncError(.withheld, "the account's checkpoint stands before where its log was dropped")
        }
        // Each record as the server has it now, 500 at a time.
        var current: [Data: (version: Int64, ciphertext: Data)] = [:]
        var start = 0
        while start < checkpoint.entries.count {
            let chunk = checkpoint.entries[start..<min(start + 500, checkpoint.entries.count)]
            start += chunk.count
            var request = ByteWriter()
            request.writeCount(chunk.count)
            for entry in chunk { request.writeBytes(entry.recordID) }
            var reader = SyncReader(try connection.call(.records, request.data), "records")
            for _ in 0..<(try reader.count(max: 1_000)) {
                let id = try reader.fixed(16)
                current[id] = (try reader.signed(), try reader.bytes(max: 2 << 20))
            }
            try reader.end()
        }
        try transaction { local in
            for entry in checkpoint.entries {
                guard let record = current[entry.recordID] else {
                    throw SyncError(.withheld, "the server has left out a record the account's checkpoint names")
                }
                // Changed since: its newer version comes in the log after the checkpoint.
                if record.version != entry.version {
                    guard record.version > entry.version else {
                        throw SyncError(.replayed, "the server gave a record at a version before the checkpoint's")
                    }
                    continue
                }
                guard try Digest.sha256(record.ciphertext) == entry.ciphertextHash else {
                    throw SyncError(.forged, "a record's ciphertext is not the one the checkpoint's signer saw")
                }
                let writer = try RecordCipher.header(record.ciphertext).writer
                try applyRecord(
                    entry, record.ciphertext, seq: 0, writer: writer, trustedNow: view.member(writer) != nil, local,
                    enrollment, report: &report, merge: &merge)
            }
            try SyncEnrollment.setInteger(local.ledger, SyncEnrollment.Name.cursor, checkpoint.seq)
            try local.ledger.setValue(SyncEnrollment.Name.chain, checkpoint.chain)
            try local.ledger.setChain(checkpoint.chain, at: checkpoint.seq)
        }
    }
}
