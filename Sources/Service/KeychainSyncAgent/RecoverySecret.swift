import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainSyncProtocol

/// The keys an account's recovery secret stretches into (scrypt, N = 2^15, r = 8, p = 1, with the
/// account's random salt; then HKDF apart):
/// - `authentication`, which the server checks against the SHA-256 it keeps (with its guess limit);
/// - `anchor`, an HMAC key the server never sees, which binds the account's recovery identity to the
///   secret, so that a joining or recovering device knows the account is the one the secret made;
/// - `escrow`, which seals the recovery identity's private keys, kept by the server for a device that
///   lost every other.
struct RecoveryKeys {
    static let logN: UInt8 = 15
    static let escrowDomain = Data("swift-keychain sync escrow v2\u{0}".utf8)
    let authentication: SecureBytes
    let anchor: SecureBytes
    let escrow: SecureBytes

    init(secret: SecureBytes, salt: Data) throws(SyncError) {
        do {
            let stretched = try KeyDerivation.scrypt(password: secret, salt: salt, logN: Self.logN, r: 8, p: 1)
            authentication = try KeyDerivation.hkdf(key: stretched, info: "swift-keychain sync recovery authentication")
            anchor = try KeyDerivation.hkdf(key: stretched, info: "swift-keychain sync recovery anchor")
            escrow = try KeyDerivation.hkdf(key: stretched, info: "swift-keychain sync recovery escrow")
        } catch {
            throw SyncError(.server, "cannot stretch the recovery secret: \(error)")
        }
    }

    var authenticationBytes: Data { authentication.withUnsafeBytes { Data($0) } }

    func anchorKey() throws(SyncError) -> HMACKey {
        do { return try HMACKey(key: anchor) } catch { throw SyncError(.server, "cannot make the anchor key") }
    }

    /// What binds `identity` to this secret in a trust view.
    func binding(of identity: SyncDevice, account: Data) throws(SyncError) -> Data {
        do { return try anchorKey().authenticationCode(TrustView.bindingInput(account: account, identity)) } catch {
            throw SyncError(.server, "HMAC failed")
        }
    }

    /// A recovery identity's private keys, sealed for the server to keep.
    func seal(identity: SyncDeviceKeys, account: Data) throws(SyncError) -> Data {
        guard case .software(let signing, let encryption) = identity.holder else {
            throw SyncError(.invalid, "a recovery identity is a pair of software keys")
        }
        do {
            var writer = ByteWriter()
            try signing.externalRepresentation().withUnsafeBytes { writer.writeSecretBytes($0) }
            try encryption.externalRepresentation().withUnsafeBytes { writer.writeSecretBytes($0) }
            return try AESGCM.seal(writer.takeSecure(), key: escrow, authenticating: Self.escrowDomain + account)
        } catch { throw SyncError(.server, "cannot seal the recovery identity") }
    }

    /// The recovery identity the server kept, opened with this secret.
    func openIdentity(_ sealed: Data, account: Data) throws(SyncError) -> SyncDeviceKeys {
        let plain: SecureBytes
        do {
            plain = try AESGCM.openSecure(sealed, key: escrow, authenticating: Self.escrowDomain + account)
        } catch { throw SyncError(.forged, "the account's escrow does not open with this recovery secret") }
        return try plain.withBorrowedData { (data) throws(SyncError) in
            var reader = ByteReader(data)
            guard let signing = try? reader.readSecureBytes(), let encryption = try? reader.readSecureBytes(),
                reader.isAtEnd,
                let signingKey = try? signing.withBorrowedData({
                    try AsymmetricKey.importing($0, kind: .ec, isPrivate: true)
                }),
                let encryptionKey = try? encryption.withBorrowedData({
                    try AsymmetricKey.importing($0, kind: .ec, isPrivate: true)
                })
            else { throw SyncError(.forged, "the account's escrow is damaged") }
            return try SyncDeviceKeys(signing: signingKey, encryption: encryptionKey, name: "recovery")
        }
    }
}

/// An account's id on the server: derived from its name, so that a name is all a user types. The
/// server sees the id, not the name (though it can test a guessed name against it).
enum SyncAccount {
    static func id(of name: String) throws(SyncError) -> Data {
        guard !name.isEmpty, name.utf8.count <= 256 else {
            throw SyncError(.invalid, "an account name is 1 to 256 bytes")
        }
        do {
            return try Digest.sha256(Data("swift-keychain sync account\u{0}".utf8) + Data(name.utf8)).prefix(16)
        } catch {
            throw SyncError(.server, "SHA-256 failed")
        }
    }
}
