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
        // A checkpoint only lets the log shrink: one refused (another device's newer one came first)
        // fails nothing.
        _ = try? connection.call(.putCheckpoint, body.data)
    }

    /// Starts a device that has read nothing from the account's newest checkpoint: the log before it
    /// was dropped. Records the checkpoint names at a version the server no longer has are awaited
    /// like a withheld record: the log after the checkpoint must bring them.
    func startFromCheckpoint(
        _ connection: SyncConnection, _ enrollment: SyncEnrollment, view: TrustView, report: inout SyncReport,
        merge: inout MergeOutcome, awaiting: inout [Data: Int64]
    ) throws {
        var answer = SyncReader(try connection.call(.checkpoint), "a checkpoint's answer")
        let bytes = try answer.bytes(max: SyncChannel.maximumFrame)
        let compacted = try answer.signed()
        try answer.end()
        guard !bytes.isEmpty else {
            throw SyncError(.withheld, "the server dropped the account's log but shows no checkpoint")
        }
        let checkpoint = try SyncCheckpoint.decode(bytes)
        guard checkpoint.account == enrollment.account else {
            throw SyncError(.forged, "the account's checkpoint names another account")
        }
        // Signed by a device trusted in the view it names, which comes before the view this device
        // holds: a device removed since (or lost, before a recovery) signed it while it was trusted.
        let signedIn = try Self.acceptedView(
            epoch: checkpoint.viewEpoch, hash: checkpoint.viewHash, leadingTo: view,
            from: try connection.accountState().views)
        guard let signer = signedIn.member(checkpoint.signer), checkpoint.isSigned(by: signer) else {
            throw SyncError(.forged, "the account's checkpoint is not signed by a device of the view it names")
        }
        guard checkpoint.seq >= compacted else {
            throw SyncError(.withheld, "the account's checkpoint stands before where its log was dropped")
        }
        let recovered = try transaction { local in try SyncEnrollment.recoveredWriters(local.ledger) }
        var start = 0
        var batch = 500
        while start < checkpoint.entries.count {
            let chunk = Array(checkpoint.entries[start..<min(start + batch, checkpoint.entries.count)])
            var request = ByteWriter()
            request.writeCount(chunk.count)
            for entry in chunk { request.writeBytes(entry.recordID) }
            // (A `Result`, not a `catch`: the compiler cannot take a catch among these inout arguments.)
            let fetched = Result { () throws(SyncError) -> Data in try connection.call(.records, request.data) }
            if case .failure(let error) = fetched, error.code == .tooLarge, batch > 1 {
                // Large records: fewer at a time.
                batch /= 2
                continue
            }
            let answer = try fetched.get()
            start += chunk.count
            // Only what was asked for, each checked as it comes.
            let wanted = Dictionary(uniqueKeysWithValues: chunk.map { ($0.recordID, $0) })
            var current: [Data: (version: Int64, ciphertext: Data)] = [:]
            var reader = SyncReader(answer, "records")
            for _ in 0..<(try reader.count(max: chunk.count)) {
                let id = try reader.fixed(16)
                let version = try reader.signed()
                let ciphertext = try reader.bytes(max: 2 << 20)
                guard wanted[id] != nil, current[id] == nil else {
                    throw SyncError(.forged, "the server answered a record that was not asked for")
                }
                current[id] = (version, ciphertext)
            }
            try reader.end()
            try transaction { local in
                for entry in chunk {
                    guard let record = current[entry.recordID] else {
                        throw SyncError(.withheld, "the server has left out a record the account's checkpoint names")
                    }
                    // Changed since: its newer version must come in the log after the checkpoint.
                    if record.version != entry.version {
                        guard record.version > entry.version else {
                            throw SyncError(.replayed, "the server gave a record at a version before the checkpoint's")
                        }
                        awaiting[entry.recordID] = record.version
                        continue
                    }
                    guard try Digest.sha256(record.ciphertext) == entry.ciphertextHash else {
                        throw SyncError(.forged, "a record's ciphertext is not the one the checkpoint's signer saw")
                    }
                    let writer = try RecordCipher.header(record.ciphertext).writer
                    // After a recovery, what the lost devices wrote before it counts as it does in the log.
                    let trusted =
                        view.member(writer) != nil
                        || (checkpoint.seq <= recovered.through && recovered.writers.contains(writer))
                    try applyRecord(
                        entry, record.ciphertext, seq: 0, writer: writer, trustedNow: trusted, local, enrollment,
                        report: &report, merge: &merge)
                }
                // What merging left to push is kept with what it came from.
                try Self.saveMerge(local, merge)
                try Self.saveAwaiting(local, awaiting)
            }
        }
        try transaction { local in
            try SyncEnrollment.setInteger(local.ledger, SyncEnrollment.Name.cursor, checkpoint.seq)
            try local.ledger.setValue(SyncEnrollment.Name.chain, checkpoint.chain)
            try local.ledger.setChain(checkpoint.chain, at: checkpoint.seq)
        }
    }

    /// The view at `epoch` with `hash` among the account's views, when the views from it lead, each
    /// following the one before, to `held` (the view this device holds).
    static func acceptedView(epoch: UInt64, hash: Data, leadingTo held: TrustView, from encoded: [Data]) throws
        -> TrustView
    {
        if held.epoch == epoch, held.hash == hash { return held }
        let views = try encoded.map { try TrustView.decode($0) }
        guard epoch < held.epoch, let start = views.firstIndex(where: { $0.epoch == epoch && $0.hash == hash }) else {
            throw SyncError(.forged, "the account's checkpoint names a view this device did not accept")
        }
        var previous = views[start]
        for next in views[(start + 1)...] where next.epoch <= held.epoch {
            try next.check(following: previous)
            previous = next
        }
        guard previous.hash == held.hash else {
            throw SyncError(.forged, "the account's checkpoint names a view this device did not accept")
        }
        return views[start]
    }
}
