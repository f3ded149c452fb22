import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine
import KeychainSyncProtocol

/// A device's keys: made by the keychain's device root where it has hardware for them (a TPM root
/// makes enclave keys in the chip, which signs and runs the ECDH step there), else in software and
/// kept sealed under the keychain's own `ThisDeviceOnly` class key (docs/sync.md).
extension SyncAgent {
    /// Who uses the sync keys in the engine: no app's access group.
    static let client = ClientIdentity(accessGroups: [])

    func makeDeviceKeys(name: String) throws -> SyncDeviceKeys {
        guard keychain.enclaveKeysAreInHardware else { return try SyncDeviceKeys.generate(name: name) }
        func make(_ label: String) throws -> (token: Data, publicKey: Data) {
            // Ephemeral (the token is kept in the ledger, no item), usable after first unlock, as the
            // device's names are: a locked device still syncs its class C items.
            let made = try keychain.generateEnclaveKey(
                [
                    "class": .string("keys"), "tkid": .string(enclaveTokenID), "perm": .bool(false),
                    "pdmn": .string(ProtectionClass.afterFirstUnlockThisDeviceOnly.attributeValue),
                    "labl": .string(label),
                ], client: Self.client)
            guard case .dictionary(let item)? = made, case .data(let token)? = item["toid"],
                let publicKey = item["v_Data"]?.bytes
            else { throw SyncError(.server, "the keychain made no enclave key for sync") }
            return (token, publicKey)
        }
        let signing = try make("sync device signing key")
        let encryption = try make("sync device encryption key")
        return Self.enclaveKeys(
            device: try SyncDevice(signingKey: signing.publicKey, encryptionKey: encryption.publicKey, name: name),
            signingToken: signing.token, encryptionToken: encryption.token, keychain: keychain)
    }

    /// Keys the device root holds, used through the keychain by their tokens.
    static func enclaveKeys(device: SyncDevice, signingToken: Data, encryptionToken: Data, keychain: Keychain)
        -> SyncDeviceKeys
    {
        SyncDeviceKeys(
            device: device, signingToken: signingToken, encryptionToken: encryptionToken,
            sign: { message in
                try keychain.useEnclaveKey(
                    ["class": .string("keys"), "toid": .data(signingToken)],
                    operation: .sign(hash: .sha256, input: .message, data: message), client: client
                ).withUnsafeBytes { Data($0) }
            },
            agree: { peer in
                try keychain.useEnclaveKey(
                    ["class": .string("keys"), "toid": .data(encryptionToken)],
                    operation: .sharedSecret(peerPublicKey: peer), client: client)
            })
    }
}
