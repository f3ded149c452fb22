import Foundation
import KeychainBytes
import KeychainCrypto

/// An account's trusted set of devices at one epoch, as Octagon keeps it: each view names the one
/// before it by hash, and is attested by a device trusted in that one. A device accepts a view only
/// when it follows one it already trusts, so a server can neither add a device nor bring back a
/// removed one; every device also signs, in its heads, the hash of the view it holds, so a server
/// that shows two devices different views is found out.
///
/// Each view also names the account's **recovery identity**: a key pair like a device's, whose private
/// half the server keeps sealed under the recovery secret (docs/sync.md), bound to the secret by an
/// HMAC under a key derived from it (`binding`, which the server cannot make). It attests the first
/// view, and a **recovery view**: one whose only member is a device that lost every other, attested by
/// the recovery identity of the view before it, with a new key generation (and a recovery identity of
/// its own, for the new secret).
///
///     body: account (16) ‖ epoch (8) ‖ previous view hash (32) ‖ zone key generation (8) ‖ members
///           ‖ recovery identity ‖ binding (32)
///     view: body (bytes) ‖ attestations: kind (1: 0 device, 1 recovery identity) ‖ signer id (16) ‖ signature
public struct TrustView: Sendable, Equatable {
    public static let maximumMembers = 64
    static let domain = Data("swift-keychain sync view v2\u{0}".utf8)

    public enum Attestation: Sendable, Equatable {
        /// ECDSA by a device of the previous view (or of this one, for the first) over the body.
        case device(id: Data, signature: Data)
        /// ECDSA by a recovery identity over the body.
        case recovery(id: Data, signature: Data)
    }

    public var account: Data
    public var epoch: UInt64
    public var previous: Data
    public var generation: UInt64
    public var members: [SyncDevice]
    public var recovery: SyncDevice
    public var binding: Data
    public var attestations: [Attestation] = []

    public init(
        account: Data, epoch: UInt64, previous: Data, generation: UInt64, members: [SyncDevice],
        recovery: SyncDevice, binding: Data
    ) {
        self.account = account
        self.epoch = epoch
        self.previous = previous
        self.generation = generation
        self.members = members
        self.recovery = recovery
        self.binding = binding
    }

    /// The view after this one, with `members` and `generation`, and the same recovery identity.
    public func successor(members: [SyncDevice], generation: UInt64) -> TrustView {
        TrustView(
            account: account, epoch: epoch + 1, previous: hash, generation: generation, members: members,
            recovery: recovery, binding: binding)
    }

    public func member(_ id: Data) -> SyncDevice? { members.first { $0.id == id } }

    public var body: Data {
        var writer = ByteWriter()
        writer.writeRaw(Self.domain)
        writer.writeBytes(account)
        writer.write(epoch)
        writer.writeBytes(previous)
        writer.write(generation)
        writer.writeCount(members.count)
        for member in members { member.encode(into: &writer) }
        recovery.encode(into: &writer)
        writer.writeBytes(binding)
        return writer.data
    }

    public var hash: Data { (try? Digest.sha256(body)) ?? Data(count: 32) }

    public func encoded() -> Data {
        var writer = ByteWriter()
        writer.writeBytes(body)
        writer.writeCount(attestations.count)
        for attestation in attestations {
            switch attestation {
            case .device(let id, let signature):
                writer.write(UInt8(0))
                writer.writeBytes(id)
                writer.writeBytes(signature)
            case .recovery(let id, let signature):
                writer.write(UInt8(1))
                writer.writeBytes(id)
                writer.writeBytes(signature)
            }
        }
        return writer.data
    }

    public static func decode(_ data: Data) throws(SyncError) -> TrustView {
        var outer = SyncReader(data, "a trust view")
        var reader = try SyncReader.fields(of: try outer.bytes(max: 64 << 10), domain: domain, what: "a trust view")
        let account = try reader.fixed(16)
        let epoch = try reader.unsigned()
        let previous = try reader.fixed(32)
        let generation = try reader.unsigned()
        guard epoch < bound, generation < bound else {
            throw SyncError(.malformed, "a trust view's epoch or generation is out of bounds")
        }
        let count = try reader.count(max: maximumMembers)
        var members: [SyncDevice] = []
        for _ in 0..<count { members.append(try SyncDevice.decode(from: &reader)) }
        let recovery = try SyncDevice.decode(from: &reader)
        let binding = try reader.fixed(32)
        try reader.end()
        guard Set(members.map(\.id)).count == members.count, members.allSatisfy({ $0.id != recovery.id }) else {
            throw SyncError(.malformed, "a trust view names a device twice")
        }
        var view = TrustView(
            account: account, epoch: epoch, previous: previous, generation: generation, members: members,
            recovery: recovery, binding: binding)
        let attestationCount = try outer.count(max: maximumMembers + 1)
        for _ in 0..<attestationCount {
            let kind = try outer.byte()
            let signer = try outer.fixed(SyncDevice.idSize)
            let signature = try outer.bytes(max: 256)
            switch kind {
            case 0: view.attestations.append(.device(id: signer, signature: signature))
            case 1: view.attestations.append(.recovery(id: signer, signature: signature))
            default: throw SyncError(.malformed, "a trust view's attestation is of an unknown kind")
            }
        }
        try outer.end()
        return view
    }

    /// The view attested by `keys`'s device (added to what attests it already).
    public func attested(by keys: SyncDeviceKeys) throws(SyncError) -> TrustView {
        var view = self
        view.attestations.append(.device(id: keys.device.id, signature: try keys.sign(body)))
        return view
    }

    /// The view attested by a recovery identity (the view's own for the first; the previous view's
    /// for a recovery).
    public func attested(byRecovery identity: SyncDeviceKeys) throws(SyncError) -> TrustView {
        var view = self
        view.attestations.append(.recovery(id: identity.device.id, signature: try identity.sign(body)))
        return view
    }

    /// Whether a device of `signers` attests this view.
    public func isAttested(byOneOf signers: [SyncDevice]) -> Bool {
        let body = body
        return attestations.contains { attestation in
            guard case .device(let id, let signature) = attestation,
                let signer = signers.first(where: { $0.id == id })
            else { return false }
            return signer.verifies(signature, over: body)
        }
    }

    /// Whether the recovery identity `identity` attests this view.
    public func isAttested(byRecovery identity: SyncDevice) -> Bool {
        let body = body
        return attestations.contains { attestation in
            guard case .recovery(let id, let signature) = attestation, id == identity.id else { return false }
            return identity.verifies(signature, over: body)
        }
    }

    /// Whether this view is a recovery of `previous`: attested by its recovery identity rather than
    /// by one of its devices.
    public func isRecovery(of previous: TrustView) -> Bool {
        !isAttested(byOneOf: previous.members) && isAttested(byRecovery: previous.recovery)
    }

    /// Checks that this view may follow `previous` (nil: this is the account's first view):
    /// - the first holds its one founding device, attested by it and by the view's recovery identity;
    /// - a later view is attested by a device of the one before, and keeps its recovery identity;
    /// - or it is a recovery: attested by the recovery identity of the one before, holding one device
    ///   (which attests it too), with a new key generation.
    ///
    /// - Parameter anchor: the HMAC key derived from the recovery secret, when the caller knows it (a
    ///   device joining or recovering): the view's recovery identity must be the one the secret made.
    ///   The server, which never holds it, passes nil.
    public func check(following previous: TrustView?, anchor: HMACKey? = nil) throws(SyncError) {
        guard !members.isEmpty else { throw SyncError(.invalid, "a trust view with no device in it") }
        guard epoch < Self.bound, generation < Self.bound else {
            throw SyncError(.malformed, "a trust view's epoch or generation is out of bounds")
        }
        if let previous {
            guard account == previous.account, epoch == previous.epoch + 1, self.previous == previous.hash,
                generation >= previous.generation
            else {
                throw SyncError(
                    .staleView, "the trust view does not follow the account's latest (epoch \(previous.epoch))")
            }
            if isAttested(byOneOf: previous.members) {
                guard recovery == previous.recovery, binding == previous.binding else {
                    throw SyncError(.forged, "only a recovery changes an account's recovery identity")
                }
            } else if isAttested(byRecovery: previous.recovery) {
                guard members.count == 1, isAttested(byOneOf: members), generation > previous.generation else {
                    throw SyncError(
                        .forged, "a recovery view holds the one device that recovers, with a new key generation")
                }
            } else {
                throw SyncError(.forged, "the trust view is attested by no device of the one before it")
            }
        } else {
            guard epoch == 1, self.previous == Data(count: 32), members.count == 1, isAttested(byOneOf: members),
                isAttested(byRecovery: recovery)
            else {
                throw SyncError(
                    .forged,
                    "an account's first view holds its one founding device and its recovery identity, which attest it")
            }
        }
        if let anchor {
            guard let expected = try? anchor.authenticationCode(Self.bindingInput(account: account, recovery)),
                ConstantTime.equal(binding, expected)
            else {
                throw SyncError(.forged, "the account's recovery identity is not the one its recovery secret made")
            }
        }
    }

    /// What `binding` authenticates: the recovery identity's keys, in this account.
    public static func bindingInput(account: Data, _ recovery: SyncDevice) -> Data {
        var writer = ByteWriter()
        writer.writeRaw(Data("swift-keychain sync recovery binding v1\u{0}".utf8))
        writer.writeBytes(account)
        writer.writeBytes(recovery.signingKey)
        writer.writeBytes(recovery.encryptionKey)
        return writer.data
    }

    /// Epochs, generations, versions and sequence numbers stay below this, so that no arithmetic on
    /// them can overflow.
    public static let bound: UInt64 = 1 << 62
}
