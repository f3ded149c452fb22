import CTSS2
import Foundation
import KeychainBytes

/// Monotonic NV counters: values the TPM keeps and only ever increases, so a file that records one can
/// be told apart from an older copy of itself.
///
/// The counters have an empty authorization, `noDA`: reading one reveals nothing, and a program that
/// can send TPM commands could bump one (a denial of service the keychain reports, never a rollback) or
/// delete it with the owner authorization anyway.
extension TPM {
    /// The owner range of NV handles this keychain picks its counters from.
    public static let counterHandles: ClosedRange<UInt32> = 0x0180_0000...0x01BF_FFFF

    /// Defines a counter at `handle` and increments it once (a counter cannot be read before its first
    /// write); returns its value. `.alreadyDefined` when the handle is taken.
    public func defineCounter(at handle: UInt32) throws -> UInt64 {
        try run("defining an NV counter") { context, _ in
            var description = TPM2B_NV_PUBLIC()
            description.nvPublic.nvIndex = TPMI_RH_NV_INDEX(handle)
            description.nvPublic.nameAlg = TPM2_ALG_ID(TPM2_ALG_SHA256)
            description.nvPublic.attributes = TPMA_NV(
                TPMA_NV_AUTHREAD | TPMA_NV_AUTHWRITE | TPMA_NV_NO_DA
                    | (TPMA_NV(TPM2_NT_COUNTER) << TPMA_NV(TPMA_NV_TPM2_NT_SHIFT)))
            description.nvPublic.dataSize = 8
            var auth = TPM2B_AUTH()
            var index = ESYS_TR(ESYS_TR_NONE)
            try Self.check(
                Esys_NV_DefineSpace(
                    context, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE), &auth, &description, &index),
                "defining an NV counter")
            defer { Self.closeHandle(index, context) }
            try Self.check(
                Esys_NV_Increment(
                    context, index, index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE)),
                "starting an NV counter")
            return try Self.read(index, context)
        }
    }

    /// The counter's value; `.missing` when no counter is defined at `handle`.
    public func readCounter(_ handle: UInt32) throws -> UInt64 {
        try run("reading an NV counter") { context, _ in
            let index = try Self.nvIndex(handle, context)
            defer { Self.closeHandle(index, context) }
            return try Self.read(index, context)
        }
    }

    /// Adds one to the counter and returns the new value.
    @discardableResult
    public func incrementCounter(_ handle: UInt32) throws -> UInt64 {
        try run("incrementing an NV counter") { context, _ in
            let index = try Self.nvIndex(handle, context)
            defer { Self.closeHandle(index, context) }
            try Self.check(
                Esys_NV_Increment(
                    context, index, index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE)),
                "incrementing an NV counter")
            return try Self.read(index, context)
        }
    }

    /// Deletes the NV index at `handle` with the owner authorization (empty, as a new TPM has it).
    public func undefineIndex(_ handle: UInt32) throws {
        try run("deleting an NV index") { context, _ in
            var index = try Self.nvIndex(handle, context)
            try Self.check(
                Esys_NV_UndefineSpace(
                    context, ESYS_TR(ESYS_TR_RH_OWNER), index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE)),
                "deleting an NV index")
            index = ESYS_TR(ESYS_TR_NONE)
        }
    }

    private static func read(_ index: ESYS_TR, _ context: OpaquePointer) throws -> UInt64 {
        var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
        try check(
            Esys_NV_Read(
                context, index, index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), 8, 0,
                &data),
            "reading an NV counter")
        defer { Esys_Free(data) }
        guard let data, data.pointee.size == 8 else { throw TPMError(.failed, "an NV counter is not 8 bytes") }
        let bytes = TPMBuffers.data(data.pointee.buffer, size: 8)
        return bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// The ESYS handle of an NV index; `.missing` when none is defined there.
    static func nvIndex(_ handle: UInt32, _ context: OpaquePointer) throws -> ESYS_TR {
        var index = ESYS_TR(ESYS_TR_NONE)
        do {
            try check(
                Esys_TR_FromTPMPublic(
                    context, TPM2_HANDLE(handle), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                    &index),
                "finding NV index 0x\(String(handle, radix: 16))")
        } catch let error as TPMError where error.code != .unreachable {
            throw TPMError(.missing, responseCode: error.responseCode, error.reason)
        }
        return index
    }

    /// Forgets an ESYS handle for an NV index (the index itself stays).
    static func closeHandle(_ handle: ESYS_TR, _ context: OpaquePointer) {
        var handle = handle
        guard handle != ESYS_TR(ESYS_TR_NONE) else { return }
        _ = Esys_TR_Close(context, &handle)
    }
}
