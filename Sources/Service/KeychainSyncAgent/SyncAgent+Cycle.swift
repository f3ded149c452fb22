import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainStorage
import KeychainSyncProtocol

/// What one `syncNow` did.
public struct SyncReport: Sendable, Equatable {
    public var pushed = 0
    public var pulled = 0
    public var conflictsResolved = 0
    public var cursor: Int64 = 0
    /// Items too large to travel (over `SyncAgent.maximumPayload`): they stay on this device.
    public var tooLarge = 0
    /// Records left unapplied because their writer is not trusted now.
    public var notTrusted = 0
}

/// A device's sync state as it keeps it (no server asked).
public struct SyncStatus: Sendable {
    public var server: String
    public var accountName: String
    public var device: SyncDevice
    public var trustedDevices: Int
    public var viewEpoch: UInt64
    public var generation: UInt64
    public var cursor: Int64
    /// The hash chain over the log up to `cursor`: two devices at one position must show the same one
    /// (compared outside the server, it finds a fork no protocol check can).
    public var chain: Data
    public var lastSync: Date?
    /// Local changes not yet on the server (of the classes the keychain can open now).
    public var pendingChanges: Int
    public var conflictsResolved: Int64
}

/// What merging left to push: records that lost to another with the same primary key (pushed as
/// tombstones that keep their content), and local edits that lost to an incoming version (pushed as
/// a version of their own, which the winner then replaces, so that the server's history keeps them).
struct MergeOutcome {
    var losers: [Data: SecureBytes] = [:]
    var overwritten: [Data: (payload: SecureBytes, date: Date, protection: ProtectionClass)] = [:]
}

/// One change on its way to the server.
struct Outgoing {
    var recordID: Data
    var replacing: Int64
    var deleted: Bool
    /// Empty for a deletion whose item is gone.
    var payload: SecureBytes
    var date: Date
    var protection: ProtectionClass
    var digest: Data
    var primaryKey: Data
    /// An overwritten edit on its way to the history: the item here (the winner) goes over it next.
    var followedByWinner = false
}

/// The sync itself: pull (verify, merge, apply), push local changes by compare-and-set, and sign
/// this device's head, until the device and the server agree.
extension SyncAgent {
    /// Pushes and pulls until this keychain and the account are both current.
    public func syncNow() throws(SyncError) -> SyncReport {
        // A push refused because the keys changed under it (a removal meanwhile) is made again once,
        // after reading the new view and keys.
        do { return try syncOnce() } catch  where error.code == .staleView { return try syncOnce() }
    }

    private func syncOnce() throws(SyncError) -> SyncReport {
        try step {
            let first = try transaction { local in try self.enrollment(local) }
            guard try transaction({ local in try local.ledger.value(SyncEnrollment.Name.pendingRecovery) }) == nil
            else {
                throw SyncError(.invalid, "a recovery of this account is not finished: run security sync recover again")
            }
            let connection = try connect(first)
            defer { connection.close() }
            guard connection.status == .trusted else {
                throw SyncError(
                    .notTrusted, "this device waits for a trusted device to approve it (security sync approve)")
            }
            var view = try refreshTrust(connection)
            let enrollment = try transaction { local in try self.enrollment(local) }
            guard enrollment.generation >= view.generation else {
                throw SyncError(.notTrusted, "this device has not been given the account's keys yet")
            }
            var report = SyncReport()
            // What an earlier sync merged and could not push yet (the connection dropped, the keychain
            // locked): kept in the ledger, so that no losing version is lost.
            var merge = try transaction { local in try Self.loadMerge(local) }
            var settled = false
            for _ in 0..<8 {
                do {
                    try pullAll(connection, enrollment, view: view, report: &report, merge: &merge)
                } catch let error as SyncError where error.code == .forged && error.reason == Self.unknownWriter {
                    // A device approved while this one synced: read the trust views again, once.
                    view = try refreshTrust(connection)
                    try pullAll(connection, enrollment, view: view, report: &report, merge: &merge)
                }
                let outgoing = try collect(enrollment, merge: merge)
                if outgoing.isEmpty {
                    settled = true
                    break
                }
                if try push(outgoing, connection, enrollment) {
                    report.pushed += outgoing.count
                    merge = MergeOutcome()
                }
            }
            guard settled else {
                throw SyncError(.conflict, "the account kept changing during 8 rounds; sync again")
            }
            // After a recovery, what the lost devices wrote is applied by the first sync that reaches
            // the log's end, and nothing of theirs after it.
            try transaction { local in try local.ledger.setValue(SyncEnrollment.Name.recoveredWriters, nil) }
            try checkHeadsAndSign(connection, enrollment, view: view, report: &report)
            report.tooLarge = Int(
                try transaction { local in try SyncEnrollment.integer(local.ledger, SyncEnrollment.Name.tooLarge) ?? 0 }
            )
            return report
        }
    }

    /// Waits until the account has changes this device has not pulled (true), or `timeout` passes
    /// (false): long polling, so that a device learns of a write at once rather than at its next
    /// periodic sync. Does not hold the agent's lock while it waits.
    public func waitForChange(timeout: Duration) throws(SyncError) -> Bool {
        let (enrollment, cursor) = try step {
            try transaction { local in
                (try self.enrollment(local), try SyncEnrollment.integer(local.ledger, SyncEnrollment.Name.cursor) ?? 0)
            }
        }
        let connection = try SyncConnection(
            address: enrollment.server, account: enrollment.account, keys: enrollment.keys,
            timeout: timeout + .seconds(30), authorities: enrollment.authorities)
        defer { connection.close() }
        return try connection.waitForChange(after: cursor, timeout: timeout) > cursor
    }

    // MARK: Pull

    private func pullAll(
        _ connection: SyncConnection, _ enrollment: SyncEnrollment, view: TrustView, report: inout SyncReport,
        merge: inout MergeOutcome
    ) throws {
        var awaiting = try transaction { local in try Self.awaiting(local) }
        // The log as it is now: a server that keeps serving new pages (replayed ones) cannot hold the
        // device here; what comes later is the next sync's.
        var target: Int64?
        var extensions = 0
        var atEnd = false
        while true {
            let cursor = try transaction { local in
                try SyncEnrollment.integer(local.ledger, SyncEnrollment.Name.cursor) ?? 0
            }
            if let target, cursor >= target {
                // A record still awaited may have changed again after the pull began: its current
                // version is further on. Followed a few times, no more.
                guard !awaiting.isEmpty, !atEnd, extensions < 3 else { break }
                extensions += 1
            }
            // (A `Result`, not a `catch`: the compiler cannot take a catch among these inout arguments.)
            let fetched = Result { () throws(SyncError) -> SyncPullPage in
                try connection.pull(after: cursor, limit: 1_000)
            }
            if case .failure(let error) = fetched, error.code == .compacted, cursor == 0 {
                // The log before the account's checkpoint is gone: a device that has read nothing yet
                // starts there.
                try startFromCheckpoint(
                    connection, enrollment, view: view, report: &report, merge: &merge, awaiting: &awaiting)
                continue
            }
            let page = try fetched.get()
            if target == nil || (target ?? 0) <= cursor { target = page.lastSeq }
            guard !page.batches.isEmpty else {
                guard page.lastSeq == cursor else {
                    throw SyncError(
                        .withheld, "the server says its log reaches \(page.lastSeq) but gives nothing after \(cursor)")
                }
                atEnd = true
                break
            }
            try transaction { local in
                try apply(page, local, enrollment, view: view, report: &report, merge: &merge, awaiting: &awaiting)
                try Self.saveAwaiting(local, awaiting)
                try Self.saveMerge(local, merge)
            }
        }
        // At the log's end, a record whose current version never came was withheld.
        guard awaiting.isEmpty || !atEnd else {
            throw SyncError(.withheld, "the server has left out the current version of \(awaiting.count) records")
        }
    }

    private static let loserPrefix = "merge loser "
    private static let overwrittenPrefix = "merge overwritten "

    /// Each losing version sealed under this keychain's `ThisDeviceOnly` key of its own item's class
    /// (a class A item's only while the keychain is unlocked).
    static func saveMerge(_ local: SyncLocal, _ merge: MergeOutcome) throws {
        for (id, payload) in merge.losers where try local.ledger.value(loserPrefix + Hex.encode(id)) == nil {
            let protection = SyncLocal.describe(payload)?.protection ?? .afterFirstUnlock
            try local.seal(payload, as: loserPrefix + Hex.encode(id), protection: thisDeviceOnly(protection))
        }
        for (id, overwritten) in merge.overwritten
        where try local.ledger.value(overwrittenPrefix + Hex.encode(id)) == nil {
            var writer = ByteWriter()
            writer.write(overwritten.date.timeIntervalSince1970)
            writer.write(UInt8(overwritten.protection.rawValue))
            overwritten.payload.withUnsafeBytes { writer.writeSecretBytes($0) }
            try local.seal(
                writer.takeSecure(), as: overwrittenPrefix + Hex.encode(id),
                protection: thisDeviceOnly(overwritten.protection))
        }
    }

    private static func loadMerge(_ local: SyncLocal) throws -> MergeOutcome {
        var merge = MergeOutcome()
        for name in try local.ledger.names(withPrefix: loserPrefix) {
            guard let id = Hex.decode(name.dropFirst(loserPrefix.count)),
                let payload = try? local.open(name)
            else { continue }
            merge.losers[id] = payload
        }
        for name in try local.ledger.names(withPrefix: overwrittenPrefix) {
            guard let id = Hex.decode(name.dropFirst(overwrittenPrefix.count)), let sealed = try? local.open(name)
            else { continue }
            let decoded = sealed.withBorrowedData { data -> (SecureBytes, Date, ProtectionClass)? in
                var reader = ByteReader(data)
                guard let seconds = try? reader.read() as Double, let raw = try? reader.read() as UInt8,
                    let protection = ProtectionClass(rawValue: Int(raw)), let payload = try? reader.readSecureBytes()
                else { return nil }
                return (payload, Date(timeIntervalSince1970: seconds), protection)
            }
            if let (payload, date, protection) = decoded { merge.overwritten[id] = (payload, date, protection) }
        }
        return merge
    }

    /// The losing versions waiting in the ledger, sealed as they are: what enrolling again in the same
    /// account carries over its fresh ledger (they are pushed by the first sync after it).
    static func pendingMerge(_ local: SyncLocal) throws -> [(name: String, value: Data)] {
        try (local.ledger.names(withPrefix: loserPrefix) + local.ledger.names(withPrefix: overwrittenPrefix))
            .compactMap { name in try local.ledger.value(name).map { (name, $0) } }
    }

    static func restorePendingMerge(_ local: SyncLocal, _ pending: [(name: String, value: Data)]) throws {
        for (name, value) in pending { try local.ledger.setValue(name, value) }
    }

    private static func forgetMerge(_ local: SyncLocal, _ id: Data) throws {
        try local.ledger.setValue(loserPrefix + Hex.encode(id), nil)
        try local.ledger.setValue(overwrittenPrefix + Hex.encode(id), nil)
    }

    private static func thisDeviceOnly(_ protection: ProtectionClass) -> ProtectionClass {
        switch protection {
        case .whenUnlocked: .whenUnlockedThisDeviceOnly
        case .always: .alwaysThisDeviceOnly
        default: .afterFirstUnlockThisDeviceOnly
        }
    }

    /// Entries whose record's current version the server has not handed out yet (kept across syncs, so
    /// that a record withheld once is reported until it comes).
    private static func awaiting(_ local: SyncLocal) throws -> [Data: Int64] {
        guard let bytes = try local.ledger.value(SyncEnrollment.Name.awaiting) else { return [:] }
        var reader = SyncReader(bytes, "the awaited records")
        var result: [Data: Int64] = [:]
        for _ in 0..<(try reader.count(max: 10_000_000)) { result[try reader.fixed(16)] = try reader.signed() }
        return result
    }

    static func saveAwaiting(_ local: SyncLocal, _ awaiting: [Data: Int64]) throws {
        var writer = ByteWriter()
        writer.writeCount(awaiting.count)
        for (id, version) in awaiting {
            writer.writeBytes(id)
            writer.write(version)
        }
        try local.ledger.setValue(SyncEnrollment.Name.awaiting, awaiting.isEmpty ? nil : writer.data)
    }

    private func apply(
        _ page: SyncPullPage, _ local: SyncLocal, _ enrollment: SyncEnrollment, view: TrustView,
        report: inout SyncReport, merge: inout MergeOutcome, awaiting: inout [Data: Int64]
    ) throws {
        let ledger = local.ledger
        var cursor = try SyncEnrollment.integer(ledger, SyncEnrollment.Name.cursor) ?? 0
        var chain = try ledger.value(SyncEnrollment.Name.chain) ?? SyncHead.origin
        let members = try SyncEnrollment.knownDevices(local)
        let recovered = try SyncEnrollment.recoveredWriters(ledger)
        for stored in page.batches {
            guard stored.firstSeq == cursor + 1 else {
                throw SyncError(
                    .withheld,
                    "the server skipped the log after \(cursor) (its next batch claims to start at \(stored.firstSeq))")
            }
            let batch = stored.batch
            guard batch.account == enrollment.account else { throw SyncError(.forged, "another account's batch") }
            guard let writer = members[batch.writer] else { throw SyncError(.forged, Self.unknownWriter) }
            guard batch.isSigned(by: writer) else {
                throw SyncError(.forged, "a batch not signed by the device it names")
            }
            // Its writer had read the log up to its base: the batch stands after it, and the history
            // the writer read there is the one this device read.
            guard batch.base < stored.firstSeq else {
                throw SyncError(
                    .withheld,
                    "the server placed a batch at \(stored.firstSeq) that its writer wrote after reading to \(batch.base): the log was renumbered"
                )
            }
            if batch.base > 0, let mine = try ledger.chain(at: batch.base), mine != batch.baseChain {
                throw SyncError(
                    .forked,
                    "device \(Hex.encode(batch.writer.prefix(4))) was shown another history up to \(batch.base) than this device"
                )
            }
            for (offset, entry) in batch.entries.enumerated() {
                let seq = stored.firstSeq + Int64(offset)
                chain = SyncHead.chain(chain, seq: seq, writer: batch.writer, entry: entry)
                try ledger.setChain(chain, at: seq)
                guard let current = page.ciphertexts[entry.recordID], current.version == entry.version else {
                    awaiting[entry.recordID] = entry.version
                    continue
                }
                awaiting[entry.recordID] = nil
                guard try Digest.sha256(current.ciphertext) == entry.ciphertextHash else {
                    throw SyncError(.forged, "a record's ciphertext is not the one its writer signed")
                }
                try applyRecord(
                    entry, current.ciphertext, seq: seq, writer: batch.writer,
                    trustedNow: view.member(batch.writer) != nil
                        || (seq <= recovered.through && recovered.writers.contains(batch.writer)),
                    local, enrollment, report: &report, merge: &merge)
            }
            cursor = stored.firstSeq + Int64(batch.entries.count) - 1
        }
        try SyncEnrollment.setInteger(ledger, SyncEnrollment.Name.cursor, cursor)
        try ledger.setValue(SyncEnrollment.Name.chain, chain)
        report.cursor = cursor
    }

    /// Applies one record's version with the merge rules (docs/sync.md): a version this device has
    /// seen superseded is a replay; a local change not yet pushed meets the incoming one by
    /// modification date (then the smaller SHA-256 of the content); the same primary key under two
    /// record ids resolves to the smaller id.
    func applyRecord(
        _ entry: SyncBatch.Entry, _ ciphertext: Data, seq: Int64, writer: Data, trustedNow: Bool, _ local: SyncLocal,
        _ enrollment: SyncEnrollment, report: inout SyncReport, merge: inout MergeOutcome
    ) throws {
        let ledger = local.ledger
        let mirror = try ledger.entry(entry.recordID)
        if let mirror {
            if entry.version == mirror.version, mirror.ciphertextHash == entry.ciphertextHash {
                // Seen already (this device's own push coming back): once, where it was written.
                guard mirror.seq == 0 || mirror.seq == seq else {
                    throw SyncError(
                        .replayed,
                        "the server gave record \(Hex.encode(entry.recordID.prefix(4))) again at another place in the log"
                    )
                }
                return
            }
            guard entry.version > mirror.version else {
                throw SyncError(
                    .replayed,
                    "the server gave record \(Hex.encode(entry.recordID.prefix(4))) at version \(entry.version) after this device saw \(mirror.version)"
                )
            }
        }
        // A record whose writer is not trusted now (a device removed since, or one the server made up)
        // is not applied: what a removed device wrote before its removal was applied by the device
        // that removed it, which seals every record again under new keys. (After a recovery, the
        // recovering device applies what the lost devices wrote up to it, once, and does the same.)
        guard trustedNow else {
            report.notTrusted += 1
            return
        }
        let header = try RecordCipher.header(ciphertext)
        guard let classKey = try SyncEnrollment.classKey(local, letter: header.letter, generation: header.generation)
        else { throw SyncError(.forged, "a record sealed under a key this device was never given") }
        let opened = try RecordCipher.open(
            ciphertext, classKey: classKey, account: enrollment.account, recordID: entry.recordID,
            version: entry.version, writer: writer, deleted: entry.deleted)
        var primaryKey = mirror?.primaryKey ?? Data()
        if !opened.deleted {
            guard let described = SyncLocal.describe(opened.payload),
                RecordCipher.classLetter(for: described.protection) == header.letter
            else { throw SyncError(.forged, "a record's item is not of the class its key is for") }
        }
        // The item here no longer syncs (sync turned off, or made ThisDeviceOnly): it stays as it is,
        // and its deletion goes to the account at the next push.
        if try local.hasNonSyncingRow(recordID: entry.recordID) {
            try ledger.put(
                SyncLedger.Entry(
                    recordID: entry.recordID, version: entry.version, deleted: entry.deleted,
                    generation: Int64(header.generation), digest: Data(), ciphertextHash: entry.ciphertextHash,
                    primaryKey: primaryKey, seq: seq))
            return
        }
        let localItem = try local.item(recordID: entry.recordID)
        let pending: Bool
        if let localItem {
            pending = mirror.map { localItem.digest != $0.digest || localItem.tombstone != $0.deleted } ?? true
        } else {
            pending = mirror.map { !$0.deleted } ?? false
        }
        var identical = false
        if pending, let localItem, !opened.deleted, !localItem.tombstone {
            identical = try local.digests(of: opened.payload)?.digest == localItem.digest
        }
        if pending, !identical {
            report.conflictsResolved += 1
            if let localItem,
                try Self.isNewer(localItem.modificationDate, localItem.payload, than: opened.date, opened.payload)
            {
                // The local change wins: the server's version is what its push replaces.
                try ledger.put(
                    SyncLedger.Entry(
                        recordID: entry.recordID, version: entry.version, deleted: entry.deleted,
                        generation: Int64(header.generation), digest: Data(), ciphertextHash: entry.ciphertextHash,
                        primaryKey: localItem.primaryKey, seq: seq))
                return
            }
            // The incoming version wins; the local edit it overwrites goes to the server's history.
            if let localItem, !localItem.tombstone {
                merge.overwritten[entry.recordID] = (
                    localItem.payload, localItem.modificationDate, localItem.protection
                )
            }
        }
        report.pulled += 1
        if opened.deleted {
            try local.remove(recordID: entry.recordID)
        } else {
            if let other = try local.item(samePrimaryKeyAs: opened.payload), other.recordID != entry.recordID,
                !other.tombstone
            {
                report.conflictsResolved += 1
                if other.recordID.lexicographicallyPrecedes(entry.recordID) {
                    // The item here keeps the key everywhere; the incoming record is deleted, its
                    // content kept in its tombstone.
                    merge.losers[entry.recordID] = opened.payload
                    try ledger.put(
                        SyncLedger.Entry(
                            recordID: entry.recordID, version: entry.version, deleted: false,
                            generation: Int64(header.generation), digest: Data(), ciphertextHash: entry.ciphertextHash,
                            primaryKey: other.primaryKey, seq: seq))
                    return
                }
                try local.remove(recordID: other.recordID)
                try ledger.clean(other.recordID)
                merge.losers[other.recordID] = other.payload
            }
            guard try local.store(opened.payload, recordID: entry.recordID) else {
                throw SyncError(.forged, "a record holds an item that does not travel")
            }
        }
        // What the pull wrote here is the server's already: not a local change to push.
        try ledger.clean(entry.recordID)
        let stored = try local.item(recordID: entry.recordID)
        if let stored { primaryKey = stored.primaryKey }
        try ledger.put(
            SyncLedger.Entry(
                recordID: entry.recordID, version: entry.version, deleted: entry.deleted,
                generation: Int64(header.generation), digest: stored?.digest ?? Data(),
                ciphertextHash: entry.ciphertextHash, primaryKey: primaryKey, seq: seq))
    }

    /// Whether the first version wins over the second: a later modification date, or the same and the
    /// smaller SHA-256 of its content. Every device decides the same.
    static func isNewer(_ date: Date, _ payload: SecureBytes, than otherDate: Date, _ other: SecureBytes) throws -> Bool
    {
        if date != otherDate { return date > otherDate }
        let a = try payload.withUnsafeBytes { try Digest.sha256(Data($0)) }
        let b = try other.withUnsafeBytes { try Digest.sha256(Data($0)) }
        return a.lexicographicallyPrecedes(b)
    }

    // MARK: Push

    static let unknownWriter = "a batch written by a device no trust view of the account names"

    /// The largest item that travels: a record's ciphertext is at most 2 MiB on the server, and sealing
    /// adds its headers and padding.
    public static let maximumPayload = (2 << 20) - 4096
    /// The ciphertext one batch carries at most.
    static let batchBytes = 24 << 20

    /// The local changes the server lacks: new and changed items, deletions, records sealed under an
    /// older generation than the current one, and the losers of a merge (deleted, content kept).
    func collect(_ enrollment: SyncEnrollment, merge: MergeOutcome) throws -> [Outgoing] {
        let losers = merge.losers
        return try transaction { local in
            let ledger = local.ledger
            let full = try ledger.value(SyncEnrollment.Name.fullScan) != nil
            // Usually only the rows written since the last sync; after an enrollment or a new key
            // generation, every item and every record.
            let dirty = try ledger.dirty()
            var mirror: [Data: SyncLedger.Entry] = [:]
            if full {
                for entry in try ledger.entries() { mirror[entry.recordID] = entry }
            } else {
                for id in dirty + Array(losers.keys) + Array(merge.overwritten.keys) {
                    if let entry = try ledger.entry(id) { mirror[id] = entry }
                }
            }
            let examined = full ? try local.items() : try dirty.compactMap { try local.item(recordID: $0) }
            var outgoing: [Outgoing] = []
            var seen = Set<Data>()
            var tooLarge: [Data] = []
            let now = Date()
            for item in examined {
                seen.insert(item.recordID)
                if losers[item.recordID] != nil || merge.overwritten[item.recordID] != nil { continue }
                if item.payload.count > Self.maximumPayload {
                    if !item.tombstone { tooLarge.append(item.recordID) }
                    continue
                }
                let known = mirror[item.recordID]
                if item.tombstone {
                    guard let known, !known.deleted else { continue }
                    outgoing.append(
                        Outgoing(
                            recordID: item.recordID, replacing: known.version, deleted: true, payload: item.payload,
                            date: item.modificationDate, protection: item.protection, digest: Data(),
                            primaryKey: item.primaryKey))
                } else if known == nil || known?.digest != item.digest || known?.deleted == true
                    || UInt64(known?.generation ?? 0) < enrollment.generation
                {
                    outgoing.append(
                        Outgoing(
                            recordID: item.recordID, replacing: known?.version ?? 0, deleted: false,
                            payload: item.payload,
                            date: item.modificationDate, protection: item.protection, digest: item.digest,
                            primaryKey: item.primaryKey))
                }
            }
            // First the overwritten edit, as a version of its own; the next round pushes the winner
            // (the ledger's digest no longer matches it) over it.
            for (id, overwritten) in merge.overwritten {
                guard let known = mirror[id] else {
                    try Self.forgetMerge(local, id)
                    continue
                }
                outgoing.append(
                    Outgoing(
                        recordID: id, replacing: known.version, deleted: false, payload: overwritten.payload,
                        date: overwritten.date, protection: overwritten.protection, digest: Data(),
                        primaryKey: known.primaryKey, followedByWinner: true))
                seen.insert(id)
            }
            for (id, payload) in losers {
                let known = mirror[id]
                if known?.deleted == true {
                    try Self.forgetMerge(local, id)
                    continue
                }
                outgoing.append(
                    Outgoing(
                        recordID: id, replacing: known?.version ?? 0, deleted: true, payload: payload, date: now,
                        protection: SyncLocal.describe(payload)?.protection ?? .afterFirstUnlock, digest: Data(),
                        primaryKey: known?.primaryKey ?? Data()))
                seen.insert(id)
            }
            // Items gone without a tombstone (replaced by a pulled record with their key): deleted. A row
            // this device cannot open now (class A while locked) is not gone.
            for entry in mirror.values where !entry.deleted && !seen.contains(entry.recordID) {
                // A row that still syncs but cannot be opened now (class A while locked) is not gone; one
                // whose sync was turned off, or made ThisDeviceOnly, is gone from the account.
                if try local.hasSyncingRow(recordID: entry.recordID) { continue }
                outgoing.append(
                    Outgoing(
                        recordID: entry.recordID, replacing: entry.version, deleted: true,
                        payload: SecureBytes(copying: [UInt8]()),
                        date: now, protection: .afterFirstUnlock, digest: Data(), primaryKey: entry.primaryKey))
            }
            // After a new key generation, tombstones too are sealed again (by this device, which is
            // trusted now): no current record is then one a removed device wrote or can read.
            if full {
                for entry in mirror.values
                where entry.deleted && UInt64(entry.generation) < enrollment.generation
                    && !seen.contains(entry.recordID)
                {
                    outgoing.append(
                        Outgoing(
                            recordID: entry.recordID, replacing: entry.version, deleted: true,
                            payload: SecureBytes(copying: [UInt8]()), date: now, protection: .afterFirstUnlock,
                            digest: Data(), primaryKey: entry.primaryKey))
                }
            }
            if outgoing.isEmpty {
                // In step: the rows looked at need no second look, nor rows that are gone. A row this
                // device cannot open now (class A while locked), or one too large, is looked at again.
                let looked = Set(examined.map(\.recordID)).subtracting(tooLarge)
                for id in dirty where try looked.contains(id) || !local.hasSyncingRow(recordID: id) {
                    try ledger.clean(id)
                }
                try ledger.setValue(SyncEnrollment.Name.fullScan, nil)
            }
            try SyncEnrollment.setInteger(ledger, SyncEnrollment.Name.tooLarge, Int64(tooLarge.count))
            return outgoing.sorted { $0.recordID.lexicographicallyPrecedes($1.recordID) }
        }
    }

    /// Pushes the changes in signed batches of at most 500. False when the server's versions moved on
    /// (a conflict): the caller pulls and merges, then tries again.
    private func push(_ outgoing: [Outgoing], _ connection: SyncConnection, _ enrollment: SyncEnrollment) throws -> Bool
    {
        let generation = enrollment.generation
        // Each batch names how far this device had read, and its chain there (docs/sync.md).
        let (keys, base, baseChain) = try transaction { local -> ([UInt8: SecureBytes], Int64, Data) in
            var keys: [UInt8: SecureBytes] = [:]
            for letter in [UInt8(ascii: "A"), UInt8(ascii: "C")] {
                keys[letter] = try? SyncEnrollment.classKey(local, letter: letter, generation: generation)
            }
            return (
                keys, try SyncEnrollment.integer(local.ledger, SyncEnrollment.Name.cursor) ?? 0,
                try local.ledger.value(SyncEnrollment.Name.chain) ?? SyncHead.origin
            )
        }
        var start = 0
        while start < outgoing.count {
            // At most 500 records and 24 MiB of ciphertext a batch, so that a batch (and the page a
            // device pulls it in) fits in one message.
            var end = start
            var bytes = 0
            while end < outgoing.count, end - start < 500,
                end == start || bytes + outgoing[end].payload.count + 4096 <= Self.batchBytes
            {
                bytes += outgoing[end].payload.count + 4096
                end += 1
            }
            let chunk = outgoing[start..<end]
            start = end
            var entries: [SyncBatch.Entry] = []
            var ciphertexts: [Data] = []
            for change in chunk {
                let letter = RecordCipher.classLetter(for: change.protection)
                guard let classKey = keys[letter] else {
                    throw SyncError(.locked, "the keychain is locked: class A changes wait for it to be unlocked")
                }
                let ciphertext = try RecordCipher.seal(
                    payload: change.payload, deleted: change.deleted, date: change.date, letter: letter,
                    generation: generation, classKey: classKey, account: enrollment.account, recordID: change.recordID,
                    version: change.replacing + 1, writer: enrollment.keys.device.id)
                ciphertexts.append(ciphertext)
                entries.append(
                    SyncBatch.Entry(
                        recordID: change.recordID, version: change.replacing + 1, deleted: change.deleted,
                        ciphertextHash: try Digest.sha256(ciphertext)))
            }
            let batch = try SyncBatch(
                account: enrollment.account, writer: enrollment.keys.device.id, base: base, baseChain: baseChain,
                entries: entries
            ).signed(by: enrollment.keys)
            let outcome = Result { () throws(SyncFailure) -> Int64 in
                try connection.push(SyncPush(batch: batch, ciphertexts: ciphertexts, replacing: chunk.map(\.replacing)))
            }
            let firstSeq: Int64
            switch outcome {
            case .success(let first): firstSeq = first
            case .failure(let failure):
                if failure.error.code == .conflict { return false }
                throw failure.error
            }
            try transaction { local in
                for (offset, (change, entry)) in zip(chunk, entries).enumerated() {
                    try Self.forgetMerge(local, change.recordID)
                    // Written again while the push was on its way: it stays to be looked at.
                    let now = try local.item(recordID: change.recordID)
                    let unchanged: Bool
                    if !change.deleted {
                        unchanged = now?.digest == change.digest
                    } else if let now {
                        unchanged = now.tombstone
                    } else {
                        unchanged = try !local.hasSyncingRow(recordID: change.recordID)
                    }
                    if change.followedByWinner || !unchanged {
                        try local.ledger.markDirty(change.recordID)
                    } else {
                        try local.ledger.clean(change.recordID)
                    }
                    try local.ledger.put(
                        SyncLedger.Entry(
                            recordID: change.recordID, version: entry.version, deleted: change.deleted,
                            generation: Int64(generation), digest: change.digest, ciphertextHash: entry.ciphertextHash,
                            primaryKey: change.primaryKey, seq: firstSeq + Int64(offset)))
                }
            }
        }
        return true
    }

    // MARK: Heads

    /// Compares this device's chain with the heads the other trusted devices signed (a difference is a
    /// fork: the server showed them different histories, or different views), then signs its own.
    private func checkHeadsAndSign(
        _ connection: SyncConnection, _ enrollment: SyncEnrollment, view: TrustView, report: inout SyncReport
    ) throws {
        let state = try connection.accountState()
        let (cursor, chain) = try transaction { local -> (Int64, Data) in
            let cursor = try SyncEnrollment.integer(local.ledger, SyncEnrollment.Name.cursor) ?? 0
            for bytes in state.heads {
                guard let head = try? SyncHead.decode(bytes), head.account == enrollment.account,
                    head.device != enrollment.keys.device.id, let device = view.member(head.device),
                    head.isSigned(by: device)
                else { continue }
                if head.viewEpoch == view.epoch, head.viewHash != view.hash {
                    throw SyncError(
                        .forked,
                        "device \(Hex.encode(head.device.prefix(4))) holds another trust view at the same epoch")
                }
                if head.seq > 0, head.seq <= cursor, let mine = try local.ledger.chain(at: head.seq), mine != head.chain
                {
                    throw SyncError(
                        .forked,
                        "device \(Hex.encode(head.device.prefix(4))) was shown another history up to \(head.seq) than this device"
                    )
                }
            }
            try SyncEnrollment.setInteger(
                local.ledger, SyncEnrollment.Name.lastSync, Int64(Date().timeIntervalSince1970 * 1000))
            let total =
                (try SyncEnrollment.integer(local.ledger, SyncEnrollment.Name.conflicts) ?? 0)
                + Int64(report.conflictsResolved)
            try SyncEnrollment.setInteger(local.ledger, SyncEnrollment.Name.conflicts, total)
            return (cursor, try local.ledger.value(SyncEnrollment.Name.chain) ?? SyncHead.origin)
        }
        report.cursor = cursor
        let head = try SyncHead(
            account: enrollment.account, device: enrollment.keys.device.id, seq: cursor, chain: chain,
            viewEpoch: view.epoch, viewHash: view.hash
        ).signed(by: enrollment.keys)
        var body = ByteWriter()
        body.writeBytes(head.encoded())
        _ = try connection.call(.publishHead, body.data)
        try makeCheckpointIfDue(
            connection, enrollment, view: view, cursor: cursor, chain: chain, newest: state.checkpointSeq)
    }

    // MARK: Status

    /// This device's sync state, from what it keeps (the server is not asked).
    public func status() throws(SyncError) -> SyncStatus {
        try step {
            let enrollment = try transaction { local in try self.enrollment(local) }
            let pending = try collect(enrollment, merge: MergeOutcome()).count
            return try transaction { local in
                let ledger = local.ledger
                let last = try SyncEnrollment.integer(ledger, SyncEnrollment.Name.lastSync)
                return SyncStatus(
                    server: enrollment.server.description, accountName: enrollment.accountName,
                    device: enrollment.keys.device, trustedDevices: enrollment.view.members.count,
                    viewEpoch: enrollment.view.epoch, generation: enrollment.generation,
                    cursor: try SyncEnrollment.integer(ledger, SyncEnrollment.Name.cursor) ?? 0,
                    chain: try ledger.value(SyncEnrollment.Name.chain) ?? SyncHead.origin,
                    lastSync: last.map { Date(timeIntervalSince1970: Double($0) / 1000) }, pendingChanges: pending,
                    conflictsResolved: try SyncEnrollment.integer(ledger, SyncEnrollment.Name.conflicts) ?? 0)
            }
        }
    }
}
