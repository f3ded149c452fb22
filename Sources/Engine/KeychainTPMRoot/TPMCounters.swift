import KeychainBytes
import KeychainKeybag
import KeychainTPM

/// The keybag's anchor in the TPM: two NV counters (see `KeybagAnchor`), moved on only with the
/// authorization the root derives from its secret.
struct TPMCounters: KeybagAnchor {
    let tpm: TPM
    let generationHandle: UInt32
    let writesHandle: UInt32
    let authorization: SecureBytes

    func generation() throws -> UInt64 { try TPMDeviceRoot.translating { try tpm.readCounter(generationHandle) } }
    func writes() throws -> UInt64 { try TPMDeviceRoot.translating { try tpm.readCounter(writesHandle) } }

    func advanceGeneration(to value: UInt64) throws {
        try TPMDeviceRoot.translating {
            try tpm.advanceCounter(generationHandle, to: value, authorization: authorization)
        }
    }

    func advanceWrites(to value: UInt64) throws {
        try TPMDeviceRoot.translating { try tpm.advanceCounter(writesHandle, to: value, authorization: authorization) }
    }
}
