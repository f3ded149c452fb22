import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainSyncProtocol

/// What a recovery did: the first sync's report, and the devices it took the account from (the
/// members of the view it followed), for the user to check they are the lost ones.
public struct SyncRecoveryReport: Sendable {
    public var sync: SyncReport
    public var removedDevices: [SyncDevice]
}

/// Recovering an account when every trusted device is lost: this keychain proves the recovery
/// secret, opens the recovery identity the server kept sealed under it (and through it every zone key
/// generation), and publishes a recovery view with itself as the only member, a new key generation
/// and a new recovery secret. The lost devices are out of the account from then on; every record is
/// sealed again under the new keys by the sync that follows (docs/sync.md).
extension SyncAgent {
    /// Recovers the account `accountName` on `server` onto this keychain, which must not be enrolled
    /// (or must hold this account's unfinished recovery, which this finishes). `newSecret` becomes the
    /// account's recovery secret.
    public func recover(
        server: SyncAddress, accountName: String, recoverySecret: SecureBytes, newSecret: SecureBytes,
        deviceName: String, authorities: String? = nil
    ) throws(SyncError) -> SyncRecoveryReport {
        guard newSecret.count >= 8 else { throw SyncError(.invalid, "a recovery secret is at least 8 bytes") }
        guard newSecret != recoverySecret else {
            throw SyncError(.invalid, "choose a new recovery secret: a recovery spends the one it uses")
        }
        let account = try SyncAccount.id(of: accountName)
        let removed = try step { () throws -> [SyncDevice] in
            if let existing = try transaction({ local in try SyncEnrollment.load(local, keychain: keychain) }) {
                let pending = try transaction { local in
                    try local.ledger.value(SyncEnrollment.Name.pendingRecovery)
                }
                guard existing.account == account, let pending else {
                    throw SyncError(
                        .invalid, "this keychain is enrolled in a sync account; `security sync leave` first")
                }
                try resume(existing, request: pending, secret: recoverySecret)
                return []
            }
            return try begin(
                server: server, account: account, accountName: accountName, secret: recoverySecret,
                newSecret: newSecret, deviceName: deviceName, authorities: authorities)
        }
        return SyncRecoveryReport(sync: try syncNow(), removedDevices: removed)
    }

    private func begin(
        server: SyncAddress, account: Data, accountName: String, secret: SecureBytes, newSecret: SecureBytes,
        deviceName: String, authorities: String?
    ) throws -> [SyncDevice] {
        // The zone keys are kept under the keychain's class A key: a locked keychain could not keep
        // what the recovery gives it.
        guard try transaction({ local in local.isAvailable(.whenUnlockedThisDeviceOnly) }) else {
            throw SyncError(.locked, "the keychain is locked: unlock it before recovering an account")
        }
        let keys = try makeDeviceKeys(name: deviceName)
        let connection = try SyncConnection(
            address: server, account: account, keys: keys, timeout: timeout, authorities: authorities)
        defer { connection.close() }
        let old = try RecoveryKeys(secret: secret, salt: try connection.accountState().salt)
        var answer = SyncReader(try connection.call(.recover, Self.proof(old)), "a recovery")
        let identity = try old.openIdentity(try answer.bytes(max: 64 << 10), account: account)
        let state = try SyncAccountState.decode(try answer.bytes(max: SyncChannel.maximumFrame))
        try answer.end()

        // The account the server shows is the one the secret made, and its recovery identity is the
        // one the escrow held.
        let chain = try Self.checkedChain(state.views, anchor: try old.anchorKey())
        guard let latest = chain.last, latest.recovery == identity.device else {
            throw SyncError(.forged, "the account's recovery identity is not the one its escrow holds")
        }
        // Every generation's zone key, each from a share made by the device that brought the
        // generation in (the first view of it names that device as its signer): a device removed since
        // cannot slip in a key of its choosing.
        var zoneKeys: [UInt64: SecureBytes] = [:]
        for bytes in state.shares {
            let share = try ZoneKeyShare.decode(bytes)
            guard share.account == account, share.generation <= latest.generation,
                let introducing = chain.first(where: { $0.generation == share.generation }),
                let sender = introducing.members.first(where: { member in
                    member.id == share.sender && introducing.isAttested(byOneOf: [member])
                })
            else { continue }
            zoneKeys[share.generation] = try share.open(with: identity, sender: sender)
        }
        guard zoneKeys[latest.generation] != nil else {
            throw SyncError(.forged, "the account's escrow lacks its newest zone key")
        }

        // The recovery view: this device alone, a new generation, a new recovery identity; with it
        // the new secret's salt, verifier and escrow, and the new zone key's shares, all stored by the
        // server in one transaction.
        let salt = try Random.bytes(16)
        let new = try RecoveryKeys(secret: newSecret, salt: salt)
        let newIdentity = try SyncDeviceKeys.generate(name: Self.recoveryName)
        let generation = latest.generation + 1
        let view = try TrustView(
            account: account, epoch: latest.epoch + 1, previous: latest.hash, generation: generation,
            members: [keys.device], recovery: newIdentity.device,
            binding: try new.binding(of: newIdentity.device, account: account)
        ).attested(by: keys).attested(byRecovery: identity)
        let zoneKey = try SecureBytes(randomCount: 32)
        var body = ByteWriter()
        body.writeBytes(view.encoded())
        body.writeBytes(salt)
        body.writeBytes(try Digest.sha256(new.authenticationBytes))
        body.writeBytes(try new.seal(identity: newIdentity, account: account))
        // The log as this device read it: a write since (a device was not lost after all) makes the
        // server refuse, rather than leave that write unapplied.
        body.write(state.lastSeq)
        body.writeCount(2)
        for recipient in [keys.device, newIdentity.device] {
            body.writeBytes(
                try ZoneKeyShare.make(
                    zoneKey: zoneKey, generation: generation, account: account, to: recipient, from: keys
                ).encoded())
        }
        let request = body.data

        // Kept here before the server is asked: a recovery the server commits while this device fails
        // to hear it (a dropped connection) is finished by running it again, with these keys.
        try transaction { local in
            try SyncEnrollment.save(
                local, server: server, account: account, accountName: accountName, keys: keys, view: chain[0],
                authorities: authorities)
            for held in chain.dropFirst() + [view] { try SyncEnrollment.saveView(local, held) }
            for (oldGeneration, key) in zoneKeys {
                try SyncEnrollment.saveZoneKey(local, key, generation: oldGeneration)
            }
            try SyncEnrollment.saveZoneKey(local, zoneKey, generation: generation)
            try SyncEnrollment.setInteger(local.ledger, SyncEnrollment.Name.generation, Int64(generation))
            // What the lost devices wrote up to the recovery is applied by the first sync (and sealed
            // again under the new keys by its push).
            try SyncEnrollment.saveRecoveredWriters(local, through: state.lastSeq, writers: latest.members.map(\.id))
            try local.ledger.setValue(SyncEnrollment.Name.pendingRecovery, request)
        }
        try complete(connection, request: request)
        return latest.members
    }

    /// Finishes a recovery this keychain began: done already when the server trusts its key; else the
    /// secret is proved again and the same request sent.
    private func resume(_ enrollment: SyncEnrollment, request: Data, secret: SecureBytes) throws {
        let connection = try connect(enrollment)
        defer { connection.close() }
        if connection.status != .trusted {
            let old = try RecoveryKeys(secret: secret, salt: try connection.accountState().salt)
            _ = try connection.call(.recover, Self.proof(old))
            try complete(connection, request: request)
        }
        try transaction { local in try local.ledger.setValue(SyncEnrollment.Name.pendingRecovery, nil) }
    }

    /// Sends the recovery. A refusal forgets it here (the account is as it was; recover again from the
    /// start); a failure on the way keeps it, to be finished by running the recovery again.
    private func complete(_ connection: SyncConnection, request: Data) throws {
        do {
            _ = try connection.call(.completeRecovery, request)
        } catch let error where Self.refusals.contains(error.code) {
            try transaction { local in
                try local.ledger.erase()
                try local.ledger.untrack()
            }
            throw error
        }
        try transaction { local in try local.ledger.setValue(SyncEnrollment.Name.pendingRecovery, nil) }
    }

    /// The server's answers that say the recovery was not made (any other failure may have come after
    /// it was).
    private static let refusals: Set<SyncError.Code> = [
        .staleView, .forged, .invalid, .unauthenticated, .recoveryRejected, .recoveryLocked, .noAccount, .removed,
        .notTrusted,
    ]

    private static func proof(_ keys: RecoveryKeys) -> Data {
        var writer = ByteWriter()
        writer.writeBytes(keys.authenticationBytes)
        return writer.data
    }
}
