import CTSS2
import Foundation
import KeychainBytes

/// A sealed data object as the TPM made it: its public and (encrypted by the parent) private parts,
/// marshalled. Useless without the TPM whose primary it was created under.
public struct TPMSealedObject: Equatable, Sendable {
    public var publicArea: Data
    public var privateArea: Data

    public init(publicArea: Data, privateArea: Data) {
        self.publicArea = publicArea
        self.privateArea = privateArea
    }
}

/// What a sealed object demands before it gives its secret up.
public struct TPMSealPolicy: Sendable, Equatable {
    /// An NV counter that must hold exactly this value (PolicyNV, equal): the object dies when the
    /// counter moves on, so advancing the counter revokes it.
    public var counter: (handle: UInt32, value: UInt64)?
    /// The object's authorization value must be proved (PolicyAuthValue).
    public var authorizationValue: Bool

    public init(counter: (handle: UInt32, value: UInt64)? = nil, authorizationValue: Bool = false) {
        self.counter = counter
        self.authorizationValue = authorizationValue
    }

    public static func == (lhs: TPMSealPolicy, rhs: TPMSealPolicy) -> Bool {
        lhs.counter?.handle == rhs.counter?.handle && lhs.counter?.value == rhs.counter?.value
            && lhs.authorizationValue == rhs.authorizationValue
    }

    var isEmpty: Bool { counter == nil && !authorizationValue }
}

extension TPM {
    /// Seals `secret` (at most 128 bytes) in a data object under the storage primary, fixed to this TPM
    /// and this parent (it cannot be duplicated elsewhere).
    ///
    /// - Parameters:
    ///   - authorization: the object's authorization value (a passcode-derived key), or nil for none.
    ///   - policy: what unsealing demands; with a policy the object can be used through it alone.
    ///   - dictionaryAttackProtected: wrong authorizations count towards the TPM's lockout (for a
    ///     passcode); otherwise the object is `noDA`.
    public func seal(
        _ secret: SecureBytes, authorization: SecureBytes?, policy: TPMSealPolicy, dictionaryAttackProtected: Bool
    ) throws -> TPMSealedObject {
        try run("sealing a secret") { context, primary in
            let digest = policy.isEmpty ? Data() : try Self.policyDigest(policy, context)
            var sensitive = TPM2B_SENSITIVE_CREATE()
            defer { TPMBuffers.wipe(&sensitive) }
            try secret.withUnsafeBytes {
                try TPMBuffers.fill(&sensitive.sensitive.data.buffer, size: &sensitive.sensitive.data.size, from: $0)
            }
            if let authorization {
                try authorization.withUnsafeBytes {
                    try TPMBuffers.fill(
                        &sensitive.sensitive.userAuth.buffer, size: &sensitive.sensitive.userAuth.size, from: $0)
                }
            }
            var template = TPM2B_PUBLIC()
            template.publicArea.type = TPM2_ALG_ID(TPM2_ALG_KEYEDHASH)
            template.publicArea.nameAlg = TPM2_ALG_ID(TPM2_ALG_SHA256)
            var attributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
            // With a policy, the policy alone: `adminWithPolicy` too, or ObjectChangeAuth would test an
            // authorization (an old passcode) without the policy's counter.
            attributes |= policy.isEmpty ? TPMA_OBJECT_USERWITHAUTH : TPMA_OBJECT_ADMINWITHPOLICY
            if !dictionaryAttackProtected { attributes |= TPMA_OBJECT_NODA }
            template.publicArea.objectAttributes = TPMA_OBJECT(attributes)
            try TPMBuffers.fill(
                &template.publicArea.authPolicy.buffer, size: &template.publicArea.authPolicy.size, from: digest)
            template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_ID(TPM2_ALG_NULL)
            // The sensitive part (secret and authorization) is the first parameter: encrypted on the bus.
            let session = try Self.startSession(
                context, primary: primary, type: TPM2_SE(TPM2_SE_HMAC),
                attributes: TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT))
            defer { Self.flush(context, session) }
            return try Self.createObject(
                context, primary: primary, session: session, sensitive: &sensitive, template: &template,
                "sealing a secret"
            ).object
        }
    }

    /// Loads and unseals `object`, satisfying `policy` (which must be the one it was sealed with) and
    /// proving `authorization`. The answer is encrypted on the bus.
    ///
    /// Errors: `.authorizationFailed` for a wrong authorization (counted by the TPM when the object is
    /// dictionary-attack protected), `.lockout`, `.policyFailed` when the counter moved on,
    /// `.foreignObject` for a blob this TPM's primary did not make or that was edited.
    public func unseal(_ object: TPMSealedObject, authorization: SecureBytes?, policy: TPMSealPolicy) throws
        -> SecureBytes
    {
        try withLoadedObject(object, "unsealing a secret") { context, primary, handle in
            var auth = TPM2B_AUTH()
            defer { TPMBuffers.wipe(&auth) }
            if let authorization {
                try authorization.withUnsafeBytes { try TPMBuffers.fill(&auth.buffer, size: &auth.size, from: $0) }
            }
            try Self.check(Esys_TR_SetAuth(context, handle, &auth), "setting an authorization")
            let session: ESYS_TR
            if policy.isEmpty {
                session = try Self.startSession(
                    context, primary: primary, type: TPM2_SE(TPM2_SE_HMAC),
                    attributes: TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT))
            } else {
                session = try Self.startSession(
                    context, primary: primary, type: TPM2_SE(TPM2_SE_POLICY),
                    attributes: TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT))
            }
            defer { Self.flush(context, session) }
            if !policy.isEmpty { try Self.satisfy(policy, session: session, context) }
            var out: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
            do {
                try Self.check(
                    Esys_Unseal(context, handle, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &out),
                    "unsealing a secret")
            } catch var error as TPMError {
                error.reachedCheck = true
                throw error
            }
            defer {
                if let out { TPMBuffers.wipe(&out.pointee) }
                Esys_Free(out)
            }
            guard let out else { throw TPMError(.failed, "the TPM returned no secret") }
            return TPMBuffers.secure(out.pointee.buffer, size: out.pointee.size)
        }
    }

    /// Loads `object` under the primary, runs `body` with its handle, and flushes it.
    func withLoadedObject<T>(
        _ object: TPMSealedObject, _ operation: String, _ body: (OpaquePointer, ESYS_TR, ESYS_TR) throws -> T
    ) throws -> T {
        var publicPart = TPM2B_PUBLIC()
        var privatePart = TPM2B_PRIVATE()
        try Self.unmarshal(object.publicArea, into: &publicPart, Tss2_MU_TPM2B_PUBLIC_Unmarshal)
        try Self.unmarshal(object.privateArea, into: &privatePart, Tss2_MU_TPM2B_PRIVATE_Unmarshal)
        return try run(operation) { context, primary in
            var handle = ESYS_TR(ESYS_TR_NONE)
            do {
                try Self.check(
                    Esys_Load(
                        context, primary, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                        &privatePart, &publicPart, &handle),
                    "\(operation): loading the object")
            } catch let error as TPMError where error.code == .failed || error.code == .authorizationFailed {
                // The TPM refuses a private part its primary did not make with one of several codes;
                // out of object memory is not one of them.
                if error.isWarning { throw error }
                throw TPMError(.foreignObject, responseCode: error.responseCode, error.reason)
            }
            defer { Self.flush(context, handle) }
            return try body(context, primary, handle)
        }
    }

    // MARK: Policies

    /// The digest a policy session reaches after `policy`'s assertions, from a trial session.
    private static func policyDigest(_ policy: TPMSealPolicy, _ context: OpaquePointer) throws -> Data {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2_ALG_ID(TPM2_ALG_NULL)
        var session = ESYS_TR(ESYS_TR_NONE)
        try check(
            Esys_StartAuthSession(
                context, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE(TPM2_SE_TRIAL), &symmetric, TPM2_ALG_ID(TPM2_ALG_SHA256),
                &session),
            "starting a trial session")
        defer { flush(context, session) }
        try satisfy(policy, session: session, context)
        var digest: UnsafeMutablePointer<TPM2B_DIGEST>?
        try check(
            Esys_PolicyGetDigest(
                context, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &digest),
            "reading a policy digest")
        defer { Esys_Free(digest) }
        guard let digest else { throw TPMError(.failed, "the TPM returned no policy digest") }
        return TPMBuffers.data(digest.pointee.buffer, size: digest.pointee.size)
    }

    /// Runs `policy`'s assertions in `session`, always in the same order (the digest depends on it).
    private static func satisfy(_ policy: TPMSealPolicy, session: ESYS_TR, _ context: OpaquePointer) throws {
        do {
            try assert(policy, session: session, context)
        } catch let error as TPMError where error.code == .authorizationFailed {
            // The owner's authorization (for reading the counter), not the object's: never a wrong passcode.
            throw TPMError(.failed, responseCode: error.responseCode, error.reason)
        }
    }

    private static func assert(_ policy: TPMSealPolicy, session: ESYS_TR, _ context: OpaquePointer) throws {
        if let counter = policy.counter {
            let index = try nvIndex(counter.handle, context)
            defer { closeHandle(index, context) }
            var operand = TPM2B_OPERAND()
            var bigEndian = counter.value.bigEndian
            try withUnsafeBytes(of: &bigEndian) { try TPMBuffers.fill(&operand.buffer, size: &operand.size, from: $0) }
            try check(
                Esys_PolicyNV(
                    context, ESYS_TR(ESYS_TR_RH_OWNER), index, session, ESYS_TR(ESYS_TR_PASSWORD),
                    ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE), &operand, 0, TPM2_EO(TPM2_EO_EQ)),
                "checking the keychain's counter")
        }
        if policy.authorizationValue {
            try check(
                Esys_PolicyAuthValue(
                    context, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE)),
                "asking for the authorization value")
        }
    }

    // MARK: Marshalling

    static func marshal<Value>(
        _ value: UnsafeMutablePointer<Value>,
        _ function: (UnsafePointer<Value>?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) -> TSS2_RC
    ) throws -> Data {
        var buffer = [UInt8](repeating: 0, count: MemoryLayout<Value>.size + 16)
        var offset = 0
        let count = buffer.count
        try check(function(value, &buffer, count, &offset), "marshalling a TPM object")
        return Data(buffer.prefix(offset))
    }

    static func unmarshal<Value>(
        _ data: Data, into value: inout Value,
        _ function: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<Value>?) -> TSS2_RC
    ) throws {
        var offset = 0
        let bytes = [UInt8](data)
        let rc = function(bytes, bytes.count, &offset, &value)
        guard rc == TSS2_RC(TSS2_RC_SUCCESS), offset == bytes.count else {
            throw TPMError(.foreignObject, responseCode: rc, "a TPM object in the keychain is malformed")
        }
    }
}
