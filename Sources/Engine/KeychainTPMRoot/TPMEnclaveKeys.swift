import Foundation
import KeychainBytes
import KeychainKeybag
import KeychainTPM

/// Enclave keys in the TPM: P-256 keys the chip makes and keeps (`fixedTPM | fixedParent`, so they
/// cannot be duplicated to another TPM); the keychain stores their objects, which load under this
/// TPM's primary alone. Who may use one is decided before, by the keychain's access control.
struct TPMEnclaveKeys: EnclaveKeyHardware {
    let tpm: TPM

    func createKey() throws -> (publicKey: Data, keyObject: Data) {
        try TPMDeviceRoot.translating {
            let made = try tpm.createKey()
            return (made.publicKey, made.object.encoded())
        }
    }

    func sign(keyObject: Data, digest: Data) throws -> (r: Data, s: Data) {
        try TPMDeviceRoot.translating { try tpm.sign(TPMSealedObject.decode(keyObject), digest: digest) }
    }

    func sharedSecret(keyObject: Data, peer: Data) throws -> SecureBytes {
        try TPMDeviceRoot.translating { try tpm.sharedSecret(TPMSealedObject.decode(keyObject), peer: peer) }
    }
}
