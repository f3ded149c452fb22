import CTSS2
import Foundation
import KeychainBytes

/// Monotonic NV counters: values the TPM keeps and only ever increases, so a file that records one can
/// be told apart from an older copy of itself.
///
/// A counter is read with the owner authorization (empty, as on a new TPM: reading one reveals
/// nothing) and moved on only with its own authorization, which the keychain derives from its root
/// secret and proves in a salted session. A program with the owner authorization can still delete one
/// (the keychain then says so).
extension TPM {
    /// The owner range of NV handles this keychain picks its counters from.
    public static let counterHandles: ClosedRange<UInt32> = 0x0180_0000...0x01BF_FFFF

    /// Defines a counter at `handle` with `authorization` and moves it on once (a counter cannot be
    /// read before its first write); returns its value. `.alreadyDefined` when the handle is taken.
    public func defineCounter(at handle: UInt32, authorization: SecureBytes) throws -> UInt64 {
        try run("defining an NV counter") { context, primary in
            var description = TPM2B_NV_PUBLIC()
            description.nvPublic.nvIndex = TPMI_RH_NV_INDEX(handle)
            description.nvPublic.nameAlg = TPM2_ALG_ID(TPM2_ALG_SHA256)
            description.nvPublic.attributes = TPMA_NV(
                TPMA_NV_OWNERREAD | TPMA_NV_AUTHWRITE | TPMA_NV_NO_DA
                    | (TPMA_NV(TPM2_NT_COUNTER) << TPMA_NV(TPMA_NV_TPM2_NT_SHIFT)))
            description.nvPublic.dataSize = 8
            var auth = TPM2B_AUTH()
            defer { TPMBuffers.wipe(&auth) }
            try authorization.withUnsafeBytes { try TPMBuffers.fill(&auth.buffer, size: &auth.size, from: $0) }
            // The authorization is the first parameter: encrypted on the bus.
            let session = try Self.startSession(
                context, primary: primary, type: TPM2_SE(TPM2_SE_HMAC),
                attributes: TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT))
            defer { Self.flush(context, session) }
            var index = ESYS_TR(ESYS_TR_NONE)
            try Self.check(
                Esys_NV_DefineSpace(
                    context, ESYS_TR(ESYS_TR_RH_OWNER), session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &auth,
                    &description, &index),
                "defining an NV counter")
            defer { Self.closeHandle(index, context) }
            do {
                try Self.increment(index, authorization: authorization, context, primary: primary)
                return try Self.read(index, context)
            } catch {
                // Not left defined and unusable.
                _ = Esys_NV_UndefineSpace(
                    context, ESYS_TR(ESYS_TR_RH_OWNER), index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE))
                throw error
            }
        }
    }

    /// The counter's value; `.missing` when no counter is defined at `handle`, or when what is defined
    /// there is not a counter made as `defineCounter` makes them (another program's index).
    public func readCounter(_ handle: UInt32) throws -> UInt64 {
        try run("reading an NV counter") { context, _ in
            let index = try Self.counterIndex(handle, context)
            defer { Self.closeHandle(index, context) }
            return try Self.read(index, context)
        }
    }

    /// Moves the counter to exactly `value`: one increment when it holds `value − 1`, none when it
    /// holds `value` already (an increment whose answer was lost), `.policyFailed` otherwise. Safe to
    /// repeat, so a reconnection never moves a counter twice.
    public func advanceCounter(_ handle: UInt32, to value: UInt64, authorization: SecureBytes) throws {
        try run("moving an NV counter on") { context, primary in
            let index = try Self.counterIndex(handle, context)
            defer { Self.closeHandle(index, context) }
            let current = try Self.read(index, context)
            if current == value { return }
            guard value > 0, current == value - 1 else {
                throw TPMError(
                    .policyFailed, "NV counter 0x\(String(handle, radix: 16)) is at \(current), not \(value) − 1")
            }
            try Self.increment(index, authorization: authorization, context, primary: primary)
        }
    }

    private static func increment(
        _ index: ESYS_TR, authorization: SecureBytes, _ context: OpaquePointer, primary: ESYS_TR
    ) throws {
        var auth = TPM2B_AUTH()
        defer { TPMBuffers.wipe(&auth) }
        try authorization.withUnsafeBytes { try TPMBuffers.fill(&auth.buffer, size: &auth.size, from: $0) }
        try check(Esys_TR_SetAuth(context, index, &auth), "setting a counter's authorization")
        // Proved by an HMAC in a salted session: the authorization itself never crosses the bus.
        let session = try startSession(
            context, primary: primary, type: TPM2_SE(TPM2_SE_HMAC),
            attributes: TPMA_SESSION(TPMA_SESSION_CONTINUESESSION))
        defer { flush(context, session) }
        try check(
            Esys_NV_Increment(context, index, index, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE)),
            "incrementing an NV counter")
    }

    /// Deletes the NV index at `handle` with the owner authorization (empty, as a new TPM has it).
    public func undefineIndex(_ handle: UInt32) throws {
        try run("deleting an NV index") { context, _ in
            let index = try Self.nvIndex(handle, context)
            do {
                try Self.check(
                    Esys_NV_UndefineSpace(
                        context, ESYS_TR(ESYS_TR_RH_OWNER), index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                        ESYS_TR(ESYS_TR_NONE)),
                    "deleting an NV index")
            } catch {
                Self.closeHandle(index, context)
                throw error
            }
        }
    }

    private static func read(_ index: ESYS_TR, _ context: OpaquePointer) throws -> UInt64 {
        var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
        try check(
            Esys_NV_Read(
                context, ESYS_TR(ESYS_TR_RH_OWNER), index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE), 8, 0, &data),
            "reading an NV counter")
        defer { Esys_Free(data) }
        guard let data, data.pointee.size == 8 else { throw TPMError(.failed, "an NV counter is not 8 bytes") }
        let bytes = TPMBuffers.data(data.pointee.buffer, size: 8)
        return bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// The attributes `defineCounter` gives, besides the written flag.
    private static let counterAttributes: UInt32 =
        UInt32(TPMA_NV_OWNERREAD | TPMA_NV_AUTHWRITE | TPMA_NV_NO_DA) | (UInt32(TPM2_NT_COUNTER) << 4)

    /// The ESYS handle of the keychain's counter at `handle`, its definition checked.
    private static func counterIndex(_ handle: UInt32, _ context: OpaquePointer) throws -> ESYS_TR {
        let index = try nvIndex(handle, context)
        var description: UnsafeMutablePointer<TPM2B_NV_PUBLIC>?
        do {
            try check(
                Esys_NV_ReadPublic(
                    context, index, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &description,
                    nil),
                "reading an NV index's definition")
        } catch {
            closeHandle(index, context)
            throw error
        }
        defer { Esys_Free(description) }
        let attributes = UInt32(description?.pointee.nvPublic.attributes ?? 0) & ~UInt32(TPMA_NV_WRITTEN)
        guard attributes == counterAttributes, description?.pointee.nvPublic.dataSize == 8 else {
            closeHandle(index, context)
            throw TPMError(
                .missing,
                "NV index 0x\(String(handle, radix: 16)) is not the keychain's counter: another program defined it")
        }
        return index
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
        } catch let error as TPMError where error.code == .missingPrimary {
            // TPM_RC_HANDLE from reading the index's public area: nothing is defined there.
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
