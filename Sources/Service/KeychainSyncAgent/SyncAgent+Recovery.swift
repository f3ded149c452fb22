import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainSyncProtocol

/// Recovering an account when every trusted device is lost: this keychain proves the recovery
/// secret, opens the recovery identity the server kept sealed under it (and through it every zone key
/// generation), and publishes a recovery view with itself as the only member, a new key generation
/// and a new recovery secret. The lost devices are out of the account from then on; every record is
/// sealed again under the new keys by the sync that follows (docs/sync.md).
extension SyncAgent {
    /// Recovers the account `accountName` on `server` onto this keychain, which must not be enrolled.
    /// `newSecret` becomes the account's recovery secret. Returns the first sync's report.
    public func recover(
        server: SyncAddress, accountName: String, recoverySecret: SecureBytes, newSecret: SecureBytes,
        deviceName: String, authorities: String? = nil
    ) throws(SyncError) -> SyncReport {
        guard newSecret.count >= 8 else { throw SyncError(.invalid, "a recovery secret is at least 8 bytes") }
        let account = try SyncAccount.id(of: accountName)
        try step {
            guard try transaction({ local in try SyncEnrollment.load(local) }) == nil else {
                throw SyncError(.invalid, "this keychain is enrolled in a sync account; `security sync leave` first")
            }
            let keys = try SyncDeviceKeys.generate(name: deviceName)
            let connection = try SyncConnection(
                address: server, account: account, keys: keys, timeout: timeout, authorities: authorities)
            defer { connection.close() }
            let old = try RecoveryKeys(secret: recoverySecret, salt: try connection.accountState().salt)
            var request = ByteWriter()
            request.writeBytes(old.authenticationBytes)
            var answer = SyncReader(try connection.call(.recover, request.data), "a recovery")
            let identity = try old.openIdentity(try answer.bytes(max: 64 << 10), account: account)
            let state = try SyncAccountState.decode(try answer.bytes(max: SyncChannel.maximumFrame))
            try answer.end()

            // The account the server shows is the one the secret made, and its recovery identity is
            // the one the escrow held.
            let chain = try Self.checkedChain(state.views, anchor: try old.anchorKey())
            guard let latest = chain.last, latest.recovery == identity.device else {
                throw SyncError(.forged, "the account's recovery identity is not the one its escrow holds")
            }
            // Every generation's zone key, shared with the recovery identity by a device of the chain.
            var everyMember: [Data: SyncDevice] = [:]
            for view in chain { for member in view.members { everyMember[member.id] = member } }
            var zoneKeys: [UInt64: SecureBytes] = [:]
            for bytes in state.shares {
                let share = try ZoneKeyShare.decode(bytes)
                guard share.account == account, share.generation <= latest.generation,
                    let sender = everyMember[share.sender]
                else { continue }
                zoneKeys[share.generation] = try share.open(with: identity, sender: sender)
            }
            guard zoneKeys[latest.generation] != nil else {
                throw SyncError(.forged, "the account's escrow lacks its newest zone key")
            }

            // The recovery view: this device alone, a new generation, a new recovery identity.
            let salt = try Random.bytes(16)
            let new = try RecoveryKeys(secret: newSecret, salt: salt)
            let newIdentity = try SyncDeviceKeys.generate(name: Self.recoveryName)
            let generation = latest.generation + 1
            let view = try TrustView(
                account: account, epoch: latest.epoch + 1, previous: latest.hash, generation: generation,
                members: [keys.device], recovery: newIdentity.device,
                binding: try new.binding(of: newIdentity.device, account: account)
            ).attested(by: keys).attested(byRecovery: identity)
            var body = ByteWriter()
            body.writeBytes(view.encoded())
            body.writeBytes(salt)
            body.writeBytes(try Digest.sha256(new.authenticationBytes))
            body.writeBytes(try new.seal(identity: newIdentity, account: account))
            // The log as this device read it: a write since (a device was not lost after all) makes
            // the server refuse, rather than leave that write unapplied.
            body.write(state.lastSeq)
            _ = try connection.call(.completeRecovery, body.data)
            let zoneKey = try SecureBytes(randomCount: 32)
            try putShares([keys.device, newIdentity.device], zoneKey: zoneKey, generation: generation, connection)

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
                // What the lost devices wrote before the recovery is applied once, here, and sealed
                // again under the new keys by this device's next push.
                try SyncEnrollment.saveRecoveredWriters(
                    local, through: state.lastSeq, writers: latest.members.map(\.id))
            }
        }
        return try syncNow()
    }
}
