import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainSyncProtocol

/// One version of a synchronizable item, as the server keeps it: its current one and the past ones
/// (the last five), each opened with the account's keys.
public struct SyncHistoryEntry: @unchecked Sendable {
    public var recordID: Data
    public var version: Int64
    /// The device that wrote it (its id, and its name when a view this device accepted named it).
    public var writer: Data
    public var writerName: String?
    /// Nil when this device was never given the key it is sealed under (a generation before it joined).
    public var date: Date?
    public var deleted: Bool
    /// Secret: the version's data. Nil for a version that does not open here.
    public var secret: SecureBytes?
    /// What the version held (class and attributes), to match it with.
    var contents: (itemClass: ItemClass, attributes: [String: ItemValue], secret: SecureBytes?)?
}

extension SyncAgent {
    /// The versions the server keeps of every synchronizable item here (deleted ones included) whose
    /// class and attributes match `matching` (`class`: `genp` or `inet`; `svce`, `acct`, `srvr`: text),
    /// newest first for each item.
    ///
    /// A version opens only with the account's key of its generation and its associated data (the
    /// account, the record id, the version and its writer): the server cannot forge one or move one
    /// from another record. It is not checked against the signed log, so a device of the account,
    /// removed since, could have sealed it (its writer is shown).
    public func history(matching: [String: String]) throws(SyncError) -> [SyncHistoryEntry] {
        try step {
            let enrollment = try transaction { local in try self.enrollment(local) }
            // The items here that match, and every record deleted here since (a deletion that came from
            // another device leaves no item: what it was is read from its versions on the server).
            let (present, deleted) = try transaction { local -> ([Data], [Data]) in
                let items = try local.items()
                let present = items.compactMap { item -> Data? in
                    guard let contents = SyncLocal.contents(item.payload), Self.matches(contents, matching) else {
                        return nil
                    }
                    return item.recordID
                }
                let here = Set(items.map(\.recordID))
                let deleted = try local.ledger.entries().filter { $0.deleted && !here.contains($0.recordID) }
                return (present, deleted.map(\.recordID))
            }
            let connection = try connect(enrollment)
            defer { connection.close() }
            var entries: [SyncHistoryEntry] = []
            let wanted = present + deleted
            var start = 0
            var batch = Self.historyBatch
            while start < wanted.count {
                let chunk = Array(wanted[start..<min(start + batch, wanted.count)])
                var request = ByteWriter()
                request.writeCount(chunk.count)
                for id in chunk { request.writeBytes(id) }
                let answer: Data
                do {
                    answer = try connection.call(.history, request.data)
                } catch let error as SyncError where error.code == .tooLarge && batch > 1 {
                    // Large records: fewer at a time.
                    batch /= 2
                    continue
                }
                start += chunk.count
                var reader = SyncReader(answer, "a history")
                try transaction { local in
                    let known = try SyncEnrollment.knownDevices(local)
                    for recordID in chunk {
                        var opened: [SyncHistoryEntry] = []
                        for _ in 0..<(try reader.count(max: 64)) {
                            let version = try reader.signed()
                            opened.append(
                                try Self.open(
                                    try reader.bytes(max: 2 << 20), recordID: recordID, version: version,
                                    account: enrollment.account, known: known, local))
                        }
                        // A record deleted here matches by its newest version that holds the item.
                        if !present.contains(recordID) {
                            guard let last = opened.first(where: { $0.contents != nil })?.contents,
                                Self.matches(last, matching)
                            else { continue }
                        }
                        entries.append(contentsOf: opened)
                    }
                }
                try reader.end()
            }
            guard !entries.isEmpty else {
                throw SyncError(.invalid, "no synchronizable item matches, here or deleted since")
            }
            return entries
        }
    }

    /// Records asked for in one request, at first: fewer when their versions do not fit in one answer.
    static let historyBatch = 64

    private static func matches(
        _ contents: (itemClass: ItemClass, attributes: [String: ItemValue], secret: SecureBytes?),
        _ matching: [String: String]
    ) -> Bool {
        for (name, wanted) in matching {
            if name == "class" {
                guard contents.itemClass.name == wanted else { return false }
            } else {
                guard case .string(let value) = contents.attributes[name], value == wanted else { return false }
            }
        }
        return true
    }

    /// One version opened: its header names its key and writer; the tombstone flag is in its
    /// associated data, so it opens as what it is.
    private static func open(
        _ ciphertext: Data, recordID: Data, version: Int64, account: Data, known: [Data: SyncDevice],
        _ local: SyncLocal
    ) throws -> SyncHistoryEntry {
        let header = try RecordCipher.header(ciphertext)
        var entry = SyncHistoryEntry(
            recordID: recordID, version: version, writer: header.writer, writerName: known[header.writer]?.name,
            date: nil, deleted: false, secret: nil, contents: nil)
        guard
            let classKey = try SyncEnrollment.classKey(local, letter: header.letter, generation: header.generation)
        else { return entry }
        for deleted in [false, true] {
            guard
                let opened = try? RecordCipher.open(
                    ciphertext, classKey: classKey, account: account, recordID: recordID, version: version,
                    writer: header.writer, deleted: deleted)
            else { continue }
            entry.deleted = opened.deleted
            entry.date = opened.date
            entry.contents = opened.deleted ? nil : SyncLocal.contents(opened.payload)
            entry.secret = entry.contents?.secret
            return entry
        }
        throw SyncError(.forged, "version \(version) of a record does not open with the key it names")
    }
}
