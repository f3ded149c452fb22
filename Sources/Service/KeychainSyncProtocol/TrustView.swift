import Foundation
import KeychainBytes
import KeychainCrypto

/// An account's trusted set of devices at one epoch, as Octagon keeps it: each view names the one
/// before it by hash, and is attested by a device trusted in that one (the first view, by its
/// founding device and by the key derived from the account's recovery secret). A device accepts a view only when it follows one it already trusts, so a server can
/// neither add a device nor bring back a removed one; every device also signs, in its heads, the
/// hash of the view it holds, so a server that shows two devices different views is found out.
///
///     body: account (16) ‖ epoch (8) ‖ previous view hash (32) ‖ zone key generation (8) ‖ members
///     view: body (bytes) ‖ attestations: kind (1: 0 device, 1 recovery) ‖ signer id (16) ‖ signature
public struct TrustView: Sendable, Equatable {
    public static let maximumMembers = 64
    static let domain = Data("swift-keychain sync view v1\u{0}".utf8)

    public enum Attestation: Sendable, Equatable {
        /// ECDSA by a device of the previous view over the body.
        case device(id: Data, signature: Data)
        /// HMAC-SHA256 over the body under the key derived from the recovery secret.
        case recovery(mac: Data)
    }

    public var account: Data
    public var epoch: UInt64
    public var previous: Data
    public var generation: UInt64
    public var members: [SyncDevice]
    public var attestations: [Attestation] = []

    public init(account: Data, epoch: UInt64, previous: Data, generation: UInt64, members: [SyncDevice]) {
        self.account = account
        self.epoch = epoch
        self.previous = previous
        self.generation = generation
        self.members = members
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
            case .recovery(let mac):
                writer.write(UInt8(1))
                writer.writeBytes(Data(count: SyncDevice.idSize))
                writer.writeBytes(mac)
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
        try reader.end()
        guard Set(members.map(\.id)).count == members.count else {
            throw SyncError(.malformed, "a trust view names a device twice")
        }
        var view = TrustView(
            account: account, epoch: epoch, previous: previous, generation: generation, members: members)
        let attestationCount = try outer.count(max: maximumMembers + 1)
        for _ in 0..<attestationCount {
            let kind = try outer.byte()
            let signer = try outer.fixed(SyncDevice.idSize)
            let signature = try outer.bytes(max: 256)
            switch kind {
            case 0: view.attestations.append(.device(id: signer, signature: signature))
            case 1: view.attestations.append(.recovery(mac: signature))
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

    /// The view attested by the recovery key.
    public func attested(byRecovery key: HMACKey) throws(SyncError) -> TrustView {
        var view = self
        do { view.attestations.append(.recovery(mac: try key.authenticationCode(body))) } catch {
            throw SyncError(.server, "HMAC failed")
        }
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

    /// Whether the recovery key attests this view.
    public func isAttested(byRecovery key: HMACKey) -> Bool {
        guard let expected = try? key.authenticationCode(body) else { return false }
        return attestations.contains { attestation in
            guard case .recovery(let mac) = attestation else { return false }
            return ConstantTime.equal(mac, expected)
        }
    }

    /// Checks that this view may follow `previous` (nil: this is the account's first view). Every view
    /// after the first is attested by a device of the one before it; the recovery key attests only
    /// the first (a joining device, which knows the secret, checks it with `recovery`; the server,
    /// which never holds it, passes nil).
    public func check(following previous: TrustView?, recovery: HMACKey?) throws(SyncError) {
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
            guard isAttested(byOneOf: previous.members) else {
                throw SyncError(.forged, "the trust view is attested by no device of the one before it")
            }
        } else {
            guard epoch == 1, self.previous == Data(count: 32), members.count == 1, isAttested(byOneOf: members) else {
                throw SyncError(.forged, "an account's first view holds its one founding device, which attests it")
            }
            if let recovery, !isAttested(byRecovery: recovery) {
                throw SyncError(.forged, "the account's first view is not attested by its recovery secret")
            }
        }
    }

    /// Epochs, generations, versions and sequence numbers stay below this, so that no arithmetic on
    /// them can overflow.
    public static let bound: UInt64 = 1 << 62
}
