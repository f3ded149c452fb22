import Foundation
import KeychainBytes

/// The sync protocol's messages. After the server's hello (protocol version, 32-byte nonce), each
/// request is an operation byte and its body, and each answer is a status byte (0 done, 1 failed)
/// and its body; a failure's body is its code (2), its reason and the details some codes carry.
public enum SyncProtocol {
    /// 3: trust views with a recovery identity, batches with their writer's base, checkpoints
    /// (2026-12-03). A server and a device of different versions refuse each other at the hello.
    public static let version: UInt8 = 3
    static let authenticationDomain = Data("swift-keychain sync auth v1\u{0}".utf8)
    /// Wrong recovery secrets an account takes before its server refuses every further one.
    public static let recoveryGuessLimit = 10

    /// What a device signs to prove it holds its key, for this connection only.
    public static func authenticationInput(nonce: Data, account: Data, device: SyncDevice) -> Data {
        var writer = ByteWriter()
        writer.writeRaw(authenticationDomain)
        writer.writeBytes(nonce)
        writer.writeBytes(account)
        device.encode(into: &writer)
        return writer.data
    }
}

public enum SyncOperation: UInt8, Sendable {
    case authenticate = 1
    case createAccount = 2
    case join = 3
    case account = 4
    case publishView = 5
    case putShares = 6
    case push = 7
    case pull = 8
    case publishHead = 9
    /// Proves the recovery secret; answers the sealed recovery identity and the account as it shares
    /// with that identity.
    case recover = 10
    /// Publishes a recovery view with the account's new recovery secret (after `recover`, on the same
    /// connection).
    case completeRecovery = 11
    /// Long polling: answers when the account's log passes a sequence number, or at a timeout.
    case wait = 12
    /// A record's current version and the past ones the server keeps, each its ciphertext.
    case history = 13
    /// A trusted device sets the account's count of wrong recovery secrets back to zero; answers what
    /// it was.
    case resetRecoveryGuesses = 14
    /// A trusted device's checkpoint; the server drops the log up to where every trusted device read.
    case putCheckpoint = 15
    /// The newest checkpoint (empty when there is none).
    case checkpoint = 16
    /// Records' current versions and ciphertexts, by id (a device starting from a checkpoint).
    case records = 17
}

/// Where a device stands in an account, as the server keeps it.
public enum SyncDeviceStatus: UInt8, Sendable, CustomStringConvertible {
    case unknown = 0
    case pending = 1
    case trusted = 2
    case removed = 3

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .pending: "waiting for approval"
        case .trusted: "trusted"
        case .removed: "removed"
        }
    }
}

/// An account as a device reads it: how the recovery secret is stretched, every trust view in order,
/// the devices and where they stand, the zone key shares sealed to the asking device, the newest head
/// of each device, and the last sequence number of the log.
public struct SyncAccountState: Sendable {
    public var salt: Data
    public var views: [Data]
    public var devices: [(device: SyncDevice, status: SyncDeviceStatus)]
    public var shares: [Data]
    public var heads: [Data]
    public var lastSeq: Int64
    /// Where the newest checkpoint stands (0: none), and how far the log was dropped (0: not at all).
    public var checkpointSeq: Int64
    public var compactedThrough: Int64

    public init(
        salt: Data, views: [Data], devices: [(device: SyncDevice, status: SyncDeviceStatus)], shares: [Data],
        heads: [Data], lastSeq: Int64, checkpointSeq: Int64 = 0, compactedThrough: Int64 = 0
    ) {
        self.salt = salt
        self.views = views
        self.devices = devices
        self.shares = shares
        self.heads = heads
        self.lastSeq = lastSeq
        self.checkpointSeq = checkpointSeq
        self.compactedThrough = compactedThrough
    }

    public func encoded() -> Data {
        var writer = ByteWriter()
        writer.writeBytes(salt)
        writer.writeCount(views.count)
        for view in views { writer.writeBytes(view) }
        writer.writeCount(devices.count)
        for (device, status) in devices {
            device.encode(into: &writer)
            writer.write(status.rawValue)
        }
        writer.writeCount(shares.count)
        for share in shares { writer.writeBytes(share) }
        writer.writeCount(heads.count)
        for head in heads { writer.writeBytes(head) }
        writer.write(lastSeq)
        writer.write(checkpointSeq)
        writer.write(compactedThrough)
        return writer.data
    }

    public static func decode(_ data: Data) throws(SyncError) -> SyncAccountState {
        var reader = SyncReader(data, "an account's state")
        let salt = try reader.bytes(max: 64)
        var views: [Data] = []
        for _ in 0..<(try reader.count(max: 100_000)) { views.append(try reader.bytes(max: 64 << 10)) }
        var devices: [(SyncDevice, SyncDeviceStatus)] = []
        for _ in 0..<(try reader.count(max: 10_000)) {
            let device = try SyncDevice.decode(from: &reader)
            guard let status = SyncDeviceStatus(rawValue: try reader.byte()) else {
                throw SyncError(.malformed, "an account's state names an unknown device status")
            }
            devices.append((device, status))
        }
        var shares: [Data] = []
        for _ in 0..<(try reader.count(max: 100_000)) { shares.append(try reader.bytes(max: 8192)) }
        var heads: [Data] = []
        for _ in 0..<(try reader.count(max: 10_000)) { heads.append(try reader.bytes(max: 2048)) }
        let lastSeq = try reader.signed()
        let checkpointSeq = try reader.signed()
        let compactedThrough = try reader.signed()
        try reader.end()
        guard [lastSeq, checkpointSeq, compactedThrough].allSatisfy({ $0 >= 0 && UInt64($0) < TrustView.bound }) else {
            throw SyncError(.malformed, "an account's positions are out of bounds")
        }
        return SyncAccountState(
            salt: salt, views: views, devices: devices, shares: shares, heads: heads, lastSeq: lastSeq,
            checkpointSeq: checkpointSeq, compactedThrough: compactedThrough)
    }
}

/// One push: the writer's signed batch, each record's ciphertext in the batch's order, and the
/// version each replaces (0 for a new record).
public struct SyncPush: Sendable {
    public var batch: SyncBatch
    public var ciphertexts: [Data]
    public var replacing: [Int64]

    public init(batch: SyncBatch, ciphertexts: [Data], replacing: [Int64]) {
        self.batch = batch
        self.ciphertexts = ciphertexts
        self.replacing = replacing
    }

    public func encoded() -> Data {
        var writer = ByteWriter(capacity: ciphertexts.reduce(256) { $0 + $1.count + 16 })
        writer.writeBytes(batch.encoded())
        writer.writeCount(ciphertexts.count)
        for (ciphertext, version) in zip(ciphertexts, replacing) {
            writer.writeBytes(ciphertext)
            writer.write(version)
        }
        return writer.data
    }

    public static func decode(_ data: Data) throws(SyncError) -> SyncPush {
        var reader = SyncReader(data, "a push")
        let batch = try SyncBatch.decode(try reader.bytes(max: 1 << 20))
        let count = try reader.count(max: SyncBatch.maximumEntries)
        var ciphertexts: [Data] = []
        var replacing: [Int64] = []
        for _ in 0..<count {
            ciphertexts.append(try reader.bytes(max: 2 << 20))
            let version = try reader.signed()
            guard version >= 0, UInt64(version) < TrustView.bound else {
                throw SyncError(.malformed, "a push replaces a version out of bounds")
            }
            replacing.append(version)
        }
        try reader.end()
        guard count == batch.entries.count else {
            throw SyncError(.malformed, "a push carries another number of records than its batch names")
        }
        return SyncPush(batch: batch, ciphertexts: ciphertexts, replacing: replacing)
    }
}

/// What a pull returns: whole batches after the cursor (each with the sequence number of its first
/// entry), the current ciphertext of each entry that is still its record's latest version, and the
/// last sequence number the server has.
public struct SyncPullPage: Sendable {
    public struct Batch: Sendable {
        public var firstSeq: Int64
        public var batch: SyncBatch

        public init(firstSeq: Int64, batch: SyncBatch) {
            self.firstSeq = firstSeq
            self.batch = batch
        }
    }

    public var batches: [Batch]
    /// Keyed by record id and version.
    public var ciphertexts: [Data: (version: Int64, ciphertext: Data)]
    public var lastSeq: Int64

    public init(batches: [Batch], ciphertexts: [Data: (version: Int64, ciphertext: Data)], lastSeq: Int64) {
        self.batches = batches
        self.ciphertexts = ciphertexts
        self.lastSeq = lastSeq
    }

    public func encoded() -> Data {
        var writer = ByteWriter(capacity: ciphertexts.values.reduce(256) { $0 + $1.ciphertext.count + 64 })
        writer.writeCount(batches.count)
        for batch in batches {
            writer.write(batch.firstSeq)
            writer.writeBytes(batch.batch.encoded())
        }
        writer.writeCount(ciphertexts.count)
        for (id, record) in ciphertexts {
            writer.writeBytes(id)
            writer.write(record.version)
            writer.writeBytes(record.ciphertext)
        }
        writer.write(lastSeq)
        return writer.data
    }

    public static func decode(_ data: Data) throws(SyncError) -> SyncPullPage {
        var reader = SyncReader(data, "a pulled page")
        var batches: [Batch] = []
        for _ in 0..<(try reader.count(max: 100_000)) {
            let first = try reader.signed()
            guard first > 0, UInt64(first) < TrustView.bound else {
                throw SyncError(.malformed, "a pulled batch's position is out of bounds")
            }
            batches.append(Batch(firstSeq: first, batch: try SyncBatch.decode(try reader.bytes(max: 1 << 20))))
        }
        var ciphertexts: [Data: (Int64, Data)] = [:]
        for _ in 0..<(try reader.count(max: 100_000)) {
            let id = try reader.fixed(16)
            let version = try reader.signed()
            ciphertexts[id] = (version, try reader.bytes(max: 2 << 20))
        }
        let lastSeq = try reader.signed()
        try reader.end()
        guard lastSeq >= 0, UInt64(lastSeq) < TrustView.bound else {
            throw SyncError(.malformed, "a pulled page's end is out of bounds")
        }
        return SyncPullPage(batches: batches, ciphertexts: ciphertexts, lastSeq: lastSeq)
    }
}

/// The records a push found changed on the server: each id with its version there.
public struct SyncConflicts: Sendable {
    public var current: [(recordID: Data, version: Int64)]

    public init(current: [(recordID: Data, version: Int64)]) { self.current = current }

    public func encoded() -> Data {
        var writer = ByteWriter()
        writer.writeCount(current.count)
        for (id, version) in current {
            writer.writeBytes(id)
            writer.write(version)
        }
        return writer.data
    }

    public static func decode(_ data: Data) throws(SyncError) -> SyncConflicts {
        var reader = SyncReader(data, "a conflict list")
        var current: [(Data, Int64)] = []
        for _ in 0..<(try reader.count(max: SyncBatch.maximumEntries)) {
            current.append((try reader.bytes(max: 64), try reader.signed()))
        }
        try reader.end()
        return SyncConflicts(current: current)
    }
}

/// Answers on the wire.
public enum SyncAnswer {
    public static func done(_ body: Data = Data()) -> Data { Data([0]) + body }

    public static func failed(_ error: SyncError, details: Data = Data()) -> Data {
        var writer = ByteWriter()
        writer.write(UInt8(1))
        writer.write(error.code.rawValue)
        writer.writeString(error.reason)
        writer.writeBytes(details)
        return writer.data
    }

    /// The body of a successful answer; a failure is thrown, with its details.
    public static func body(of answer: Data) throws(SyncFailure) -> Data {
        guard let status = answer.first else { throw SyncFailure(SyncError(.malformed, "an empty answer")) }
        if status == 0 { return Data(answer.dropFirst()) }
        let parsed: (error: SyncError, details: Data)
        do { parsed = try failure(Data(answer.dropFirst())) } catch { throw SyncFailure(error) }
        throw SyncFailure(parsed.error, details: parsed.details)
    }

    private static func failure(_ data: Data) throws(SyncError) -> (error: SyncError, details: Data) {
        var reader = SyncReader(data, "a failure")
        let code = try reader.uint16()
        let reason = try reader.string(max: 4096)
        let details = try reader.bytes(max: 1 << 20)
        try reader.end()
        return (SyncError(SyncError.Code(rawValue: code) ?? .server, "the server: " + reason), details)
    }
}

/// A failure answer: its error, and the details some codes carry (a conflict's current versions).
public struct SyncFailure: Error {
    public var error: SyncError
    public var details: Data

    public init(_ error: SyncError, details: Data = Data()) {
        self.error = error
        self.details = details
    }
}
