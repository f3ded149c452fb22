import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainStorage
import KeychainSyncProtocol

/// A keychain's side of sync: enrolls it in an account, approves and removes devices, and syncs its
/// synchronizable items with the account's other devices through a `keychain-syncd`, trusting the
/// server with nothing it could read or forge unnoticed (docs/sync.md).
public final class SyncAgent: @unchecked Sendable {
    public let keychain: Keychain
    /// Serializes this agent's steps: one sync at a time per keychain in this process.
    private let lock = NSLock()
    /// How long a step waits for the server before it gives up.
    public var timeout: Duration = .seconds(30)
    /// Log entries after the account's newest checkpoint past which a sync signs a new one (0: never).
    public var checkpointInterval: Int64 = 4_096

    public init(keychain: Keychain) { self.keychain = keychain }

    /// Runs a step with the keychain's errors mapped to sync's.
    func step<T>(_ body: () throws -> T) throws(SyncError) -> T {
        lock.lock()
        defer { lock.unlock() }
        do {
            return try body()
        } catch let error as SyncError {
            throw error
        } catch let failure as SyncFailure {
            throw failure.error
        } catch let error as KeychainError where error.code == .interactionNotAllowed {
            throw SyncError(.locked, "the keychain is locked: \(error.reason)")
        } catch let error as KeychainError {
            throw SyncError(.invalid, error.reason)
        } catch {
            throw SyncError(.server, "\(error)")
        }
    }

    /// A transaction of the keychain's database in which a sync error keeps its code (the engine
    /// reports every other failure as its own).
    func transaction<T>(_ body: (SyncLocal) throws -> T) throws -> T {
        var thrown: SyncError?
        do {
            return try keychain.syncTransaction { local in
                do { return try body(local) } catch let error as SyncError {
                    thrown = error
                    throw error
                }
            }
        } catch {
            if let thrown { throw thrown }
            throw error
        }
    }

    func enrollment(_ local: SyncLocal) throws -> SyncEnrollment {
        guard let enrollment = try SyncEnrollment.load(local, keychain: keychain) else {
            throw SyncError(.notEnrolled, "this keychain is not enrolled in a sync account (security sync enroll)")
        }
        return enrollment
    }

    func connect(_ enrollment: SyncEnrollment) throws(SyncError) -> SyncConnection {
        try SyncConnection(
            address: enrollment.server, account: enrollment.account, keys: enrollment.keys, timeout: timeout,
            authorities: enrollment.authorities)
    }

    // MARK: Enrolling

    /// Enrolls this keychain as a device of the account `accountName` on `server`. The first device
    /// makes the account with `recoverySecret`; a later one proves the secret and then waits for a
    /// trusted device to approve it. Returns where the device stands.
    ///
    /// - Parameter authorities: for a `tls://` server, a PEM file of the CA certificates to trust
    ///   (nil: the system's); kept with the enrollment.
    public func enroll(
        server: SyncAddress, accountName: String, recoverySecret: SecureBytes, deviceName: String,
        authorities: String? = nil
    ) throws(SyncError) -> SyncDeviceStatus {
        guard recoverySecret.count >= 8 else { throw SyncError(.invalid, "a recovery secret is at least 8 bytes") }
        let account = try SyncAccount.id(of: accountName)
        return try step {
            let existing = try transaction { local in try SyncEnrollment.load(local, keychain: keychain) }
            if let existing, existing.account != account {
                throw SyncError(
                    .invalid, "this keychain is enrolled in another account; `security sync leave` first")
            }
            let keys = try existing?.keys ?? makeDeviceKeys(name: deviceName)
            let connection = try SyncConnection(
                address: server, account: account, keys: keys, timeout: timeout, authorities: authorities)
            defer { connection.close() }
            let state: SyncAccountState
            do {
                state = try connection.accountState()
            } catch let error as SyncError where error.code == .noAccount {
                return try createAccount(
                    connection, server: server, accountName: accountName, secret: recoverySecret,
                    authorities: authorities)
            }
            let recovery = try RecoveryKeys(secret: recoverySecret, salt: state.salt)
            if connection.status == .unknown {
                var body = ByteWriter()
                body.writeBytes(recovery.authenticationBytes)
                _ = try connection.call(.join, body.data)
            }
            // The account the server shows must be the one the secret made: its views follow one
            // another from the first, and the newest names the recovery identity the secret binds.
            let joined = try connection.accountState()
            let chain = try Self.checkedChain(joined.views, anchor: try recovery.anchorKey())
            let genesis = chain[0]
            try transaction { local in
                // Enrolling again in the same account: losing versions not pushed yet stay to be pushed.
                let pending = existing == nil ? [] : try Self.pendingMerge(local)
                try SyncEnrollment.save(
                    local, server: server, account: account, accountName: accountName, keys: keys, view: genesis,
                    authorities: authorities)
                try Self.restorePendingMerge(local, pending)
            }
            // A device approved already (enrolling again) takes its keys now.
            if connection.status == .trusted { _ = try refreshTrust(connection) }
            return connection.status == .trusted ? .trusted : .pending
        }
    }

    private func createAccount(
        _ connection: SyncConnection, server: SyncAddress, accountName: String, secret: SecureBytes,
        authorities: String?
    ) throws -> SyncDeviceStatus {
        let keys = connection.keys
        let account = connection.account
        let salt = try Random.bytes(16)
        let recovery = try RecoveryKeys(secret: secret, salt: salt)
        let identity = try SyncDeviceKeys.generate(name: Self.recoveryName)
        let zoneKey = try SecureBytes(randomCount: 32)
        let genesis = try TrustView(
            account: account, epoch: 1, previous: Data(count: 32), generation: 1, members: [keys.device],
            recovery: identity.device, binding: try recovery.binding(of: identity.device, account: account)
        ).attested(by: keys).attested(byRecovery: identity)
        var body = ByteWriter()
        body.writeBytes(salt)
        body.writeBytes(try Digest.sha256(recovery.authenticationBytes))
        body.writeBytes(try recovery.seal(identity: identity, account: account))
        body.writeBytes(genesis.encoded())
        _ = try connection.call(.createAccount, body.data)
        // The recovery identity holds every generation's zone key too: the escrow.
        try putShares([keys.device, identity.device], zoneKey: zoneKey, generation: 1, connection)
        try transaction { local in
            try SyncEnrollment.save(
                local, server: server, account: account, accountName: accountName, keys: keys, view: genesis,
                authorities: authorities)
            try SyncEnrollment.saveZoneKey(local, zoneKey, generation: 1)
            try SyncEnrollment.setInteger(local.ledger, SyncEnrollment.Name.generation, 1)
        }
        return .trusted
    }

    func putShares(_ devices: [SyncDevice], zoneKey: SecureBytes, generation: UInt64, _ connection: SyncConnection)
        throws
    {
        var body = ByteWriter()
        body.writeCount(devices.count)
        for device in devices {
            body.writeBytes(
                try ZoneKeyShare.make(
                    zoneKey: zoneKey, generation: generation, account: connection.account, to: device,
                    from: connection.keys
                ).encoded())
        }
        _ = try connection.call(.putShares, body.data)
    }

    /// Points this device at another server of its account (the account's servers moved, or another
    /// instance serves the same database).
    public func setServer(_ address: SyncAddress) throws(SyncError) {
        try step {
            try transaction { local in
                _ = try enrollment(local)
                try SyncEnrollment.sealName(local, Data(address.description.utf8), as: SyncEnrollment.Name.server)
            }
        }
    }

    /// Whether this keychain is enrolled (read from its ledger alone).
    public func isEnrolled() -> Bool {
        (try? step { try transaction { local in try local.ledger.value(SyncEnrollment.Name.account) != nil } }) == true
    }

    /// Forgets this keychain's enrollment (its items stay; it syncs no more until enrolled again). It
    /// syncs once first, when the server answers, so that local changes and losing versions of merges
    /// reach the account; what cannot be pushed then is forgotten.
    public func leave() throws(SyncError) {
        _ = try? syncNow()
        try step {
            try transaction { local in
                try local.ledger.erase()
                try local.ledger.untrack()
            }
        }
    }

    static let recoveryName = "recovery"

    /// The account's views, each checked against the one before it from the first, and the newest
    /// against the recovery secret's `anchor`.
    static func checkedChain(_ encoded: [Data], anchor: HMACKey) throws -> [TrustView] {
        let views = try encoded.map { try TrustView.decode($0) }
        guard let latest = views.last else {
            throw SyncError(.forged, "the server shows the account with no trust view")
        }
        var previous: TrustView?
        for view in views {
            try view.check(following: previous)
            previous = view
        }
        try latest.check(following: views.count > 1 ? views[views.count - 2] : nil, anchor: anchor)
        return views
    }

    /// Forgives the wrong recovery secrets the account took (from this trusted device): after ten the
    /// server refuses every secret, the right one too, for joining and for recovering. Returns how
    /// many there were.
    public func resetRecoveryGuesses() throws(SyncError) -> Int64 {
        try step {
            let enrollment = try transaction { local in try self.enrollment(local) }
            let connection = try connect(enrollment)
            defer { connection.close() }
            var reader = SyncReader(try connection.call(.resetRecoveryGuesses), "a reset")
            let before = try reader.signed()
            try reader.end()
            return before
        }
    }

    // MARK: Devices

    public struct DeviceEntry: Sendable {
        public var device: SyncDevice
        public var status: SyncDeviceStatus
        public var isThisDevice: Bool
    }

    /// The account's devices: trusted, waiting and removed, each with its id.
    public func devices() throws(SyncError) -> [DeviceEntry] {
        try step {
            let enrollment = try transaction { local in try self.enrollment(local) }
            let connection = try connect(enrollment)
            defer { connection.close() }
            let state = try connection.accountState()
            return state.devices.map {
                DeviceEntry(
                    device: $0.device, status: $0.status, isThisDevice: $0.device.id == enrollment.keys.device.id)
            }
        }
    }

    /// The device `id` names: its whole id (32 hexadecimal digits, as `devices` lists it). A prefix is
    /// not enough: a server that saw a device's id could make a key whose id starts the same.
    private static func find(_ id: String, in devices: [SyncDevice]) throws(SyncError) -> SyncDevice {
        guard let wanted = Hex.decode(id), wanted.count == SyncDevice.idSize else {
            throw SyncError(.invalid, "name a device by its whole id (32 hexadecimal digits, as sync devices lists it)")
        }
        guard let match = devices.first(where: { $0.id == wanted }) else {
            throw SyncError(.invalid, "no device \(id) in the account that this can be done to")
        }
        return match
    }

    /// Approves a device waiting to join: a new trust view with it, attested by this device, and the
    /// zone key sealed to it.
    public func approve(device prefix: String) throws(SyncError) {
        try step {
            let enrollment = try transaction { local in try self.enrollment(local) }
            let connection = try connect(enrollment)
            defer { connection.close() }
            let view = try refreshTrust(connection)
            let state = try connection.accountState()
            let device = try Self.find(prefix, in: state.devices.filter { $0.status == .pending }.map(\.device))
            let next = try view.successor(members: view.members + [device], generation: view.generation)
                .attested(by: enrollment.keys)
            var body = ByteWriter()
            body.writeBytes(next.encoded())
            _ = try connection.call(.publishView, body.data)
            let zoneKey = try transaction { local in
                try local.open(SyncEnrollment.Name.zone(view.generation))
            }
            guard let zoneKey else { throw SyncError(.invalid, "this device lacks the account's zone key") }
            try putShares([device], zoneKey: zoneKey, generation: view.generation, connection)
            try transaction { local in try SyncEnrollment.saveView(local, next) }
        }
    }

    /// Removes a device: a new trust view without it and a new zone key generation, shared with the
    /// devices that stay; every record is then sealed again under the new keys (by the next sync,
    /// which this runs). What the removed device already holds stays readable to it; nothing written
    /// from now on is.
    public func remove(device prefix: String) throws(SyncError) {
        // First everything the device wrote while it was trusted: after the removal, no device applies
        // a record of its (this one seals what it applied again, under the new keys).
        _ = try syncNow()
        try step {
            let enrollment = try transaction { local in try self.enrollment(local) }
            let connection = try connect(enrollment)
            defer { connection.close() }
            let view = try refreshTrust(connection)
            let device = try Self.find(prefix, in: view.members)
            guard device.id != enrollment.keys.device.id else {
                throw SyncError(
                    .invalid, "a device does not remove itself: `security sync leave`, or remove it from another")
            }
            let generation = view.generation + 1
            let members = view.members.filter { $0.id != device.id }
            let next = try view.successor(members: members, generation: generation).attested(by: enrollment.keys)
            var body = ByteWriter()
            body.writeBytes(next.encoded())
            _ = try connection.call(.publishView, body.data)
            let zoneKey = try SecureBytes(randomCount: 32)
            try putShares(members + [next.recovery], zoneKey: zoneKey, generation: generation, connection)
            try transaction { local in
                try SyncEnrollment.saveZoneKey(local, zoneKey, generation: generation)
                try SyncEnrollment.setInteger(local.ledger, SyncEnrollment.Name.generation, Int64(generation))
                try SyncEnrollment.saveView(local, next)
                // Every record is sealed again under the new generation: the next sync looks at all.
                try local.markEverySyncingRowDirty()
                try local.ledger.setValue(SyncEnrollment.Name.fullScan, Data([1]))
            }
        }
        _ = try syncNow()
    }

    /// Reads the account's trust views and shares from the server and accepts what follows the view
    /// this device holds: each next view attested by a device of the one before (or the recovery
    /// key), each zone key share signed by a trusted device. Returns the latest view.
    func refreshTrust(_ connection: SyncConnection) throws -> TrustView {
        let state = try connection.accountState()
        let (view, keys, shares) = try transaction {
            local -> (TrustView, SyncDeviceKeys, [(ZoneKeyShare, SyncDevice)]) in
            let enrollment = try enrollment(local)
            var view = enrollment.view
            let views = try state.views.map { try TrustView.decode($0) }
            // The server's chain must hold the view this device has, unchanged.
            guard let held = views.first(where: { $0.epoch == view.epoch }), held.hash == view.hash else {
                throw SyncError(.forked, "the server's trust views do not hold the one this device accepted")
            }
            for next in views where next.epoch > view.epoch {
                try next.check(following: view)
                view = next
                try SyncEnrollment.saveView(local, view)
            }
            try SyncEnrollment.saveView(local, view)
            guard view.member(enrollment.keys.device.id) != nil else {
                if connection.status == .pending { return (view, enrollment.keys, []) }
                throw SyncError(.removed, "this device is not in the account's trusted set any more")
            }
            var shares: [(ZoneKeyShare, SyncDevice)] = []
            for shareBytes in state.shares {
                let share = try ZoneKeyShare.decode(shareBytes)
                guard share.account == enrollment.account,
                    try local.ledger.value(SyncEnrollment.Name.classKey(UInt8(ascii: "C"), share.generation)) == nil
                else { continue }
                // Only a device trusted now shares keys: a removed one (with the server's help) must not
                // be able to hand this device a zone key it knows. A share from a device removed since
                // is passed over (another member shares that generation, or a newer one).
                guard let sender = view.member(share.sender), share.generation <= view.generation else { continue }
                shares.append((share, sender))
            }
            return (view, enrollment.keys, shares)
        }
        // Opened outside the keychain's transaction: a key the device root holds is used through the
        // keychain itself.
        let opened = try shares.map { share, sender in (share.generation, try share.open(with: keys, sender: sender)) }
        try transaction { local in
            var generation = UInt64(try SyncEnrollment.integer(local.ledger, SyncEnrollment.Name.generation) ?? 0)
            for (shared, key) in opened {
                try SyncEnrollment.saveZoneKey(local, key, generation: shared)
                generation = max(generation, shared)
            }
            try SyncEnrollment.setInteger(local.ledger, SyncEnrollment.Name.generation, Int64(generation))
        }
        return view
    }
}
