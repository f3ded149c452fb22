import KeychainKeybag
import KeychainTPM

/// The keybag's anchor in the TPM: two NV counters (see `KeybagAnchor`).
struct TPMCounters: KeybagAnchor {
    let tpm: TPM
    let generationHandle: UInt32
    let writesHandle: UInt32

    func generation() throws -> UInt64 { try TPMDeviceRoot.translating { try tpm.readCounter(generationHandle) } }
    func writes() throws -> UInt64 { try TPMDeviceRoot.translating { try tpm.readCounter(writesHandle) } }

    func advanceGeneration() throws -> UInt64 {
        try TPMDeviceRoot.translating { try tpm.incrementCounter(generationHandle) }
    }

    func advanceWrites() throws -> UInt64 { try TPMDeviceRoot.translating { try tpm.incrementCounter(writesHandle) } }
}
