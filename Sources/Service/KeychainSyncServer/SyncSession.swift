import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainSyncProtocol
import KeychainSyncStore

/// One device's connection to the server: the handshake that proves its key, then its requests,
/// each checked against what the device may do in its account. The server never decides trust: it
/// checks signatures so that it stores nothing a trusted device did not sign, and the devices check
/// everything again.
final class SyncSession {
    private let channel: SyncChannel
    private let store: SyncStore
    private var account = Data()
    private var device: SyncDevice?
    /// Whether the device was trusted when it last asked: a device that is not reads small messages
    /// only (nothing it may send is large), so a stranger cannot make the server set aside 32 MiB.
    private var trusted = false
    /// Whether the device proved the account's recovery secret on this connection (`recover`).
    private var provedRecoverySecret = false
    static let untrustedMessage = 256 << 10

    init(channel: SyncChannel, store: SyncStore) {
        self.channel = channel
        self.store = store
    }

    /// Serves the connection until the device leaves, sends what is not the protocol, or stalls.
    func run() {
        defer { channel.close() }
        do {
            try handshake()
            while true {
                let request = try channel.read(maximum: trusted ? SyncChannel.maximumFrame : Self.untrustedMessage)
                guard let first = request.first, let operation = SyncOperation(rawValue: first),
                    operation != .authenticate
                else {
                    try channel.write(SyncAnswer.failed(SyncError(.malformed, "an unknown request")))
                    return
                }
                let answer: Data
                do {
                    answer = SyncAnswer.done(try perform(operation, Data(request.dropFirst())))
                } catch let failure as SyncFailure {
                    answer = SyncAnswer.failed(failure.error, details: failure.details)
                } catch let error as SyncError {
                    answer = SyncAnswer.failed(error)
                } catch let error as SyncStoreError where error.code == .overQuota {
                    answer = SyncAnswer.failed(
                        SyncError(.limited, "the account would store more than its quota on this server"))
                } catch let error as SyncStoreError where error.code == .refused {
                    answer = SyncAnswer.failed(SyncError(.invalid, error.reason))
                } catch let error as SyncStoreError {
                    SyncLog.error("a request failed in the database: \(error.reason)")
                    answer = SyncAnswer.failed(SyncError(.server, "the database failed; try again"))
                } catch {
                    answer = SyncAnswer.failed(SyncError(.server, "the request failed"))
                }
                try channel.write(answer)
                if answer.first == 1, answer.dropFirst().first == UInt8(SyncError.Code.malformed.rawValue) { return }
            }
        } catch {
            // The device left, stalled or sent what is not the protocol: the connection ends.
        }
    }

    private func handshake() throws {
        let nonce = try Random.bytes(32)
        var hello = ByteWriter()
        hello.write(SyncProtocol.version)
        hello.writeBytes(nonce)
        try channel.write(hello.data)
        let request = try channel.read(maximum: 4096)
        guard request.first == SyncOperation.authenticate.rawValue else {
            throw SyncError(.unauthenticated, "the first request must be the handshake")
        }
        var reader = SyncReader(Data(request.dropFirst()), "a request")
        let account = try reader.fixed(16)
        let device = try reader.device()
        let signature = try reader.bytes(max: 256)
        try reader.end()
        guard
            device.verifies(
                signature, over: SyncProtocol.authenticationInput(nonce: nonce, account: account, device: device))
        else {
            try channel.write(SyncAnswer.failed(SyncError(.unauthenticated, "the device did not prove its key")))
            throw SyncError(.unauthenticated, "bad handshake")
        }
        let standing: (exists: Bool, status: Int64?)
        do {
            standing = try store.standing(account: account, device: device.id)
        } catch {
            SyncLog.error("a handshake failed in the database: \(error.reason)")
            try channel.write(SyncAnswer.failed(SyncError(.server, "the database failed; try again")))
            throw error
        }
        if standing.status == SyncStore.removed {
            try channel.write(SyncAnswer.failed(SyncError(.removed, "this device was removed from the account")))
            throw SyncError(.removed, "removed")
        }
        self.account = account
        self.device = device
        let status = standing.status.flatMap { SyncDeviceStatus(rawValue: UInt8($0)) } ?? .unknown
        trusted = status == .trusted
        try channel.write(SyncAnswer.done(Data([status.rawValue])))
    }

    private func currentDevice() throws(SyncError) -> SyncDevice {
        guard let device else { throw SyncError(.unauthenticated, "no handshake") }
        return device
    }

    /// The device's status now (it may have changed since the handshake); removed devices are refused.
    private func status() throws -> (exists: Bool, status: SyncDeviceStatus) {
        let standing = try store.standing(account: account, device: try currentDevice().id)
        let status = standing.status.flatMap { SyncDeviceStatus(rawValue: UInt8($0)) } ?? .unknown
        trusted = status == .trusted
        if status == .removed { throw SyncError(.removed, "this device was removed from the account") }
        return (standing.exists, status)
    }

    private func requireTrusted() throws {
        let (exists, status) = try status()
        guard exists else { throw SyncError(.noAccount, "no such account on this server") }
        guard status == .trusted else {
            throw SyncError(.notTrusted, "this device is \(status) in the account; a trusted device must approve it")
        }
    }

    private func perform(_ operation: SyncOperation, _ body: Data) throws -> Data {
        let device = try currentDevice()
        var reader = SyncReader(body, "a request")
        switch operation {
        case .authenticate:
            throw SyncError(.malformed, "a second handshake")
        case .createAccount:
            let salt = try reader.bytes(max: 64)
            let verifier = try reader.fixed(32)
            let escrow = try reader.bytes(max: 64 << 10)
            let genesis = try TrustView.decode(try reader.bytes(max: 64 << 10))
            try reader.end()
            guard salt.count >= 16 else { throw SyncError(.invalid, "a recovery salt is at least 16 bytes") }
            guard genesis.account == account, genesis.members.first?.id == device.id else {
                throw SyncError(.invalid, "an account's first view names the device that makes it")
            }
            try genesis.check(following: nil)
            switch try store.createAccount(
                account, salt: salt, verifier: verifier, escrow: escrow, genesis: genesis.encoded(),
                founder: Self.stored(device, status: SyncStore.trusted))
            {
            case .made: break
            case .exists: throw SyncError(.accountExists, "an account by that name exists on this server")
            case .limited:
                SyncLog.warning("a new account refused: the hour's \(store.limits.newAccountsPerHour) are made")
                throw SyncError(.limited, "the server makes no more accounts this hour; try later")
            }
            SyncLog.info(
                "account \(Hex.encode(account.prefix(4))) created by device \(Hex.encode(device.id.prefix(4)))")
            return Data()
        case .join:
            let key = try reader.fixed(32)
            try reader.end()
            let (exists, status) = try status()
            guard exists else { throw SyncError(.noAccount, "no such account on this server") }
            guard status == .unknown || status == .pending else { return Data([status.rawValue]) }
            try checkRecovery(key)
            guard try store.addPendingDevice(account: account, Self.stored(device, status: SyncStore.pending)) else {
                throw SyncError(
                    .limited,
                    "the account has \(store.limits.waitingDevices) devices waiting already: approve some first"
                )
            }
            SyncLog.info("device \(Hex.encode(device.id.prefix(4))) waits for approval")
            return Data([SyncDeviceStatus.pending.rawValue])
        case .account:
            try reader.end()
            let (exists, status) = try status()
            guard exists, let salt = try store.recoverySalt(account: account) else {
                throw SyncError(.noAccount, "no such account on this server")
            }
            guard status != .unknown else {
                // A stranger learns how to stretch the secret, and nothing else.
                return SyncAccountState(salt: salt, views: [], devices: [], shares: [], heads: [], lastSeq: 0).encoded()
            }
            let checkpoint = try store.checkpointPosition(account: account)
            let devices = try store.devices(account: account).compactMap { stored -> (SyncDevice, SyncDeviceStatus)? in
                guard
                    let public_ = try? SyncDevice(
                        signingKey: stored.signingKey, encryptionKey: stored.encryptionKey, name: stored.name),
                    let status = SyncDeviceStatus(rawValue: UInt8(clamping: stored.status))
                else { return nil }
                return (public_, status)
            }
            return SyncAccountState(
                salt: salt, views: try store.views(account: account), devices: devices,
                shares: status == .trusted ? try store.shares(account: account, recipient: device.id) : [],
                heads: status == .trusted ? try store.heads(account: account) : [],
                lastSeq: try store.lastSeq(account: account), checkpointSeq: checkpoint.seq,
                compactedThrough: checkpoint.compactedThrough
            ).encoded()
        case .publishView:
            let view = try TrustView.decode(try reader.bytes(max: 64 << 10))
            try reader.end()
            // Only a trusted device changes the trusted set (a recovery is `completeRecovery`).
            try requireTrusted()
            let latest = try latestView()
            try view.check(following: latest)
            guard !view.isRecovery(of: latest) else {
                throw SyncError(.invalid, "a recovery view comes with the account's new secret (completeRecovery)")
            }
            // Only devices that proved the secret (waiting or trusted) may be members.
            let known = try store.devices(account: account).filter { $0.status != SyncStore.removed }
            for member in view.members {
                guard known.contains(where: { $0.id == member.id && $0.signingKey == member.signingKey }) else {
                    throw SyncError(.invalid, "a view may name only devices that proved the recovery secret")
                }
            }
            guard
                try store.appendView(
                    account: account, epoch: Int64(view.epoch), view: view.encoded(),
                    members: view.members.map { Self.stored($0, status: SyncStore.trusted) })
            else { throw SyncError(.staleView, "another view took that epoch first: read the account again") }
            SyncLog.info(
                "account \(Hex.encode(account.prefix(4))) trust view \(view.epoch): \(view.members.count) devices")
            return Data()
        case .putShares:
            try requireTrusted()
            let count = try reader.count(max: TrustView.maximumMembers * 4)
            var shares: [ZoneKeyShare] = []
            for _ in 0..<count { shares.append(try ZoneKeyShare.decode(try reader.bytes(max: 8192))) }
            try reader.end()
            let latest = try latestView()
            for share in shares {
                // To a member; or to the recovery identity, of the newest generation only (the one the
                // device that made it shares).
                guard share.account == account, share.isSigned(by: device),
                    latest.member(share.recipient) != nil
                        || (share.recipient == latest.recovery.id && share.generation == latest.generation)
                else { throw SyncError(.forged, "a zone key share not signed by this device, or to no member") }
            }
            for share in shares {
                try store.putShare(
                    account: account, recipient: share.recipient, generation: Int64(share.generation),
                    share: share.encoded())
            }
            return Data()
        case .push:
            try requireTrusted()
            let push = try SyncPush.decode(body)
            let batch = push.batch
            guard batch.account == account, batch.isSigned(by: device) else {
                throw SyncError(.forged, "the batch is not signed by this device for this account")
            }
            guard !batch.entries.isEmpty else { throw SyncError(.invalid, "an empty push") }
            // A writer cannot have read past the log's end (the log only grows, so this holds at the write).
            guard batch.base <= (try store.lastSeq(account: account)) else {
                throw SyncError(.invalid, "the batch claims a base past the end of the account's log")
            }
            guard Set(batch.entries.map(\.recordID)).count == batch.entries.count else {
                throw SyncError(.invalid, "a push names a record twice")
            }
            // What devices push in one batch fits, with its headers, in one pulled page (docs/sync.md).
            guard push.ciphertexts.reduce(0, { $0 + $1.count }) <= SyncStore.pageBytes else {
                throw SyncError(.invalid, "a push carries at most 24 MiB of ciphertext")
            }
            // Every record is sealed under the account's newest key generation (its header says which,
            // in the clear): a push made before a removal changed the keys (its device had not read the
            // new view yet) would leave a record the removed device can open.
            let latest = try latestView()
            for ciphertext in push.ciphertexts {
                guard ciphertext.count >= 10 else { throw SyncError(.invalid, "a record's ciphertext has no header") }
                var generation: UInt64 = 0
                for (shift, byte) in ciphertext[ciphertext.startIndex + 2..<ciphertext.startIndex + 10].enumerated() {
                    generation |= UInt64(byte) << (8 * UInt64(shift))
                }
                guard generation >= latest.generation else {
                    throw SyncError(
                        .staleView,
                        "the account's keys changed (generation \(latest.generation)): read the account again and seal anew"
                    )
                }
            }
            var records: [PushedRecord] = []
            for (index, entry) in batch.entries.enumerated() {
                let ciphertext = push.ciphertexts[index]
                guard entry.version == push.replacing[index] + 1, push.replacing[index] >= 0,
                    try Digest.sha256(ciphertext) == entry.ciphertextHash
                else { throw SyncError(.forged, "a pushed record does not match its signed entry") }
                do { try SyncStore.check(recordID: entry.recordID, ciphertext: ciphertext) } catch {
                    throw SyncError(.invalid, error.reason)
                }
                records.append(
                    PushedRecord(
                        recordID: entry.recordID, replacing: push.replacing[index], deleted: entry.deleted,
                        ciphertext: ciphertext))
            }
            switch try store.push(
                account: account, writer: device.id, batch: batch.encoded(), records: records,
                viewEpoch: Int64(latest.epoch))
            {
            case .written(let first):
                var writer = ByteWriter()
                writer.write(first)
                return writer.data
            case .writerNotTrusted:
                throw SyncError(.removed, "this device was removed from the account while it pushed")
            case .viewChanged:
                throw SyncError(.staleView, "the account's trusted set changed while this push waited: read it again")
            case .overQuota(let limit):
                throw SyncError(
                    .limited, "the account would store more than its quota of \(limit >> 20) MiB on this server")
            case .conflict(let current):
                throw SyncFailure(
                    SyncError(
                        .conflict, "\(current.count) records changed on the server: read them again and re-apply"),
                    details: SyncConflicts(current: current).encoded())
            }
        case .pull:
            try requireTrusted()
            let after = try reader.signed()
            let limit = try reader.count(max: 100_000)
            try reader.end()
            let (batches, records, lastSeq, compacted) = try store.pull(
                account: account, after: after, limit: max(1, min(limit, 10_000)))
            guard after >= compacted else {
                throw SyncError(
                    .compacted, "the log before \(compacted) was dropped: start from the account's checkpoint")
            }
            var ciphertexts: [Data: (Int64, Data)] = [:]
            for record in records { ciphertexts[record.recordID] = (record.version, record.ciphertext) }
            var decoded: [SyncPullPage.Batch] = []
            for stored in batches {
                decoded.append(SyncPullPage.Batch(firstSeq: stored.firstSeq, batch: try SyncBatch.decode(stored.batch)))
            }
            try store.setCursor(account: account, device: device.id, to: after)
            return SyncPullPage(batches: decoded, ciphertexts: ciphertexts, lastSeq: lastSeq).encoded()
        case .publishHead:
            try requireTrusted()
            let head = try SyncHead.decode(try reader.bytes(max: 2048))
            try reader.end()
            guard head.account == account, head.isSigned(by: device) else {
                throw SyncError(.forged, "the head is not signed by this device for this account")
            }
            try store.putHead(account: account, device: device.id, seq: head.seq, head: head.encoded())
            return Data()
        case .wait:
            try requireTrusted()
            let after = try reader.signed()
            let milliseconds = Int64(try reader.uint32())
            try reader.end()
            // Under the connection's own timeout (60 s), so the answer always comes first.
            let timeout = Duration.milliseconds(min(max(milliseconds, 0), 50_000))
            var writer = ByteWriter()
            writer.write(try store.waitForChange(account: account, after: after, timeout: timeout))
            return writer.data
        case .history:
            try requireTrusted()
            var ids: [Data] = []
            for _ in 0..<(try reader.count(max: 256)) { ids.append(try reader.fixed(16)) }
            try reader.end()
            var writer = ByteWriter()
            for id in ids {
                let versions = try store.history(account: account, recordID: id)
                writer.writeCount(versions.count)
                for (version, ciphertext) in versions {
                    writer.write(version)
                    writer.writeBytes(ciphertext)
                }
                // The answer stays within one message.
                guard writer.count <= SyncStore.pageBytes else {
                    throw SyncError(.tooLarge, "those records' versions do not fit in one answer: ask for fewer")
                }
            }
            return writer.data
        case .putCheckpoint:
            try requireTrusted()
            let checkpoint = try SyncCheckpoint.decode(try reader.bytes(max: SyncChannel.maximumFrame))
            try reader.end()
            guard checkpoint.account == account, checkpoint.isSigned(by: device) else {
                throw SyncError(.forged, "the checkpoint is not signed by this device for this account")
            }
            guard checkpoint.seq <= (try store.lastSeq(account: account)) else {
                throw SyncError(.invalid, "the checkpoint stands past the end of the account's log")
            }
            let through = try store.putCheckpoint(
                account: account, seq: checkpoint.seq, checkpoint: checkpoint.encoded())
            var writer = ByteWriter()
            writer.write(through)
            return writer.data
        case .checkpoint:
            try requireTrusted()
            try reader.end()
            var writer = ByteWriter()
            writer.writeBytes(try store.checkpoint(account: account) ?? Data())
            writer.write(try store.checkpointPosition(account: account).compactedThrough)
            return writer.data
        case .records:
            try requireTrusted()
            var ids: [Data] = []
            for _ in 0..<(try reader.count(max: 500)) { ids.append(try reader.fixed(16)) }
            try reader.end()
            let records = try store.records(account: account, ids: ids)
            var writer = ByteWriter(capacity: records.reduce(64) { $0 + $1.ciphertext.count + 40 })
            writer.writeCount(records.count)
            for record in records {
                writer.writeBytes(record.recordID)
                writer.write(record.version)
                writer.writeBytes(record.ciphertext)
                guard writer.count <= SyncStore.pageBytes else {
                    throw SyncError(.tooLarge, "those records do not fit in one answer: ask for fewer")
                }
            }
            return writer.data
        case .resetRecoveryGuesses:
            try requireTrusted()
            try reader.end()
            let before = try store.resetRecoveryFailures(account: account)
            if before > 0 {
                SyncLog.warning(
                    "account \(Hex.encode(account.prefix(4))): \(before) wrong recovery secrets forgiven by device \(Hex.encode(device.id.prefix(4)))"
                )
            }
            var writer = ByteWriter()
            writer.write(before)
            return writer.data
        case .recover:
            let key = try reader.fixed(32)
            try reader.end()
            guard try status().exists else { throw SyncError(.noAccount, "no such account on this server") }
            try checkRecovery(key)
            provedRecoverySecret = true
            guard let escrow = try store.escrow(account: account), let salt = try store.recoverySalt(account: account)
            else { throw SyncError(.noAccount, "the account keeps no escrow") }
            let latest = try latestView()
            var writer = ByteWriter()
            writer.writeBytes(escrow)
            writer.writeBytes(
                SyncAccountState(
                    salt: salt, views: try store.views(account: account), devices: [],
                    shares: try store.shares(account: account, recipient: latest.recovery.id), heads: [],
                    lastSeq: try store.lastSeq(account: account)
                ).encoded())
            return writer.data
        case .completeRecovery:
            let view = try TrustView.decode(try reader.bytes(max: 64 << 10))
            let salt = try reader.bytes(max: 64)
            let verifier = try reader.fixed(32)
            let escrow = try reader.bytes(max: 64 << 10)
            let lastSeq = try reader.signed()
            var shares: [ZoneKeyShare] = []
            for _ in 0..<(try reader.count(max: 2)) {
                shares.append(try ZoneKeyShare.decode(try reader.bytes(max: 8192)))
            }
            try reader.end()
            guard provedRecoverySecret else {
                throw SyncError(.unauthenticated, "prove the account's recovery secret first (recover)")
            }
            guard salt.count >= 16 else { throw SyncError(.invalid, "a recovery salt is at least 16 bytes") }
            let latest = try latestView()
            try view.check(following: latest)
            guard view.isRecovery(of: latest), view.members.first == device else {
                throw SyncError(.invalid, "a recovery view holds the device that recovers, attested as a recovery")
            }
            // The new generation's key, for the device and for the new recovery identity.
            guard Set(shares.map(\.recipient)) == [device.id, view.recovery.id] else {
                throw SyncError(.invalid, "a recovery shares its new zone key with its device and recovery identity")
            }
            for share in shares {
                guard share.account == account, share.isSigned(by: device), share.generation == view.generation
                else {
                    throw SyncError(.forged, "a zone key share not signed by this device, or of another generation")
                }
            }
            switch try store.recoverAccount(
                account, epoch: Int64(view.epoch), view: view.encoded(),
                device: Self.stored(device, status: SyncStore.trusted),
                salt: salt, verifier: verifier, escrow: escrow, lastSeq: lastSeq,
                shares: shares.map { (recipient: $0.recipient, generation: Int64($0.generation), share: $0.encoded()) })
            {
            case .done: break
            case .staleView: throw SyncError(.staleView, "another view took that epoch first: recover again")
            case .logMoved:
                throw SyncError(
                    .staleView, "the account's log moved on while recovering (a device is not lost): recover again")
            }
            provedRecoverySecret = false
            trusted = true
            SyncLog.warning(
                "account \(Hex.encode(account.prefix(4))) recovered by device \(Hex.encode(device.id.prefix(4))); every other device removed"
            )
            return Data()
        }
    }

    /// The account's newest trust view.
    private func latestView() throws -> TrustView {
        guard let latest = try store.newestView(account: account) else {
            throw SyncError(.noAccount, "the account has no trust view")
        }
        do { return try TrustView.decode(latest) } catch {
            throw SyncError(
                .malformed,
                "the account's trust view is not of this protocol's format (an account made by an earlier protocol is made again)"
            )
        }
    }

    private func checkRecovery(_ key: Data) throws {
        switch try store.checkRecovery(
            account: account, hashed: try Digest.sha256(key), limit: Int64(SyncProtocol.recoveryGuessLimit))
        {
        case .accepted: return
        case .rejected(let remaining):
            SyncLog.warning("a wrong recovery secret for account \(Hex.encode(account.prefix(4)))")
            throw SyncError(.recoveryRejected, "that is not the account's recovery secret (\(remaining) guesses left)")
        case .locked:
            throw SyncError(
                .recoveryLocked,
                "the account took \(SyncProtocol.recoveryGuessLimit) wrong recovery secrets and refuses any more")
        case .noAccount: throw SyncError(.noAccount, "no such account on this server")
        }
    }

    private static func stored(_ device: SyncDevice, status: Int64) -> StoredDevice {
        StoredDevice(
            id: device.id, signingKey: device.signingKey, encryptionKey: device.encryptionKey, name: device.name,
            status: status)
    }
}
