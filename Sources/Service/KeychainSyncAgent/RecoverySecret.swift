import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainSyncProtocol

/// The keys an account's recovery secret stretches into (scrypt, N = 2^15, r = 8, p = 1, with the
/// account's random salt; then HKDF apart):
/// - `authentication`, which the server checks against the SHA-256 it keeps (with its guess limit);
/// - `anchor`, an HMAC key the server never sees, which attests the account's first view (and a
///   recovery's), so that a joining device knows the account it joins is the one the secret made;
/// - `escrow`, which seals the zone key for a device that lost every other.
struct RecoveryKeys {
    static let logN: UInt8 = 15
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

    /// The zone key of `generation` sealed for escrow.
    func sealEscrow(zoneKey: SecureBytes, generation: UInt64, account: Data) throws(SyncError) -> Data {
        var writer = ByteWriter()
        writer.write(generation)
        zoneKey.withUnsafeBytes { writer.writeSecretBytes($0) }
        do {
            return try AESGCM.seal(
                writer.takeSecure(), key: escrow, authenticating: Data("swift-keychain sync escrow v1".utf8) + account)
        } catch { throw SyncError(.server, "cannot seal the escrow") }
    }

    func openEscrow(_ sealed: Data, account: Data) throws(SyncError) -> (zoneKey: SecureBytes, generation: UInt64) {
        let plain: SecureBytes
        do {
            plain = try AESGCM.openSecure(
                sealed, key: escrow, authenticating: Data("swift-keychain sync escrow v1".utf8) + account)
        } catch { throw SyncError(.forged, "the account's escrow does not open with this recovery secret") }
        return try plain.withBorrowedData { (data) throws(SyncError) in
            var reader = ByteReader(data)
            guard let generation = try? reader.read() as UInt64, let key = try? reader.readSecureBytes(),
                key.count == 32,
                reader.isAtEnd
            else { throw SyncError(.forged, "the account's escrow is damaged") }
            return (key, generation)
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
