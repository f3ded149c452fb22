import CTSS2
import Foundation
import KeychainBytes
import Synchronization

/// One connection to a TPM 2.0, through the TSS's ESYS layer, with the storage primary loaded.
///
/// ESYS is not thread-safe, so every command runs under one lock. Every command that carries a secret
/// (a sealed value, an authorization) runs in a session salted to the storage primary with AES-128-CFB
/// parameter encryption, so nothing secret crosses the bus in clear. Each operation flushes what it
/// loaded: a TPM without a resource manager (swtpm) has three object slots and three session slots.
///
/// The storage primary is re-derived from the owner seed on connection (ECC P-256, `noDA`, the TCG
/// template for a storage root key), so it needs no persistent handle; its name is what a caller pins
/// (`primaryName`) to notice a cleared or replaced TPM.
public final class TPM: @unchecked Sendable {
    /// The TCTI configuration string the connection was made with (`device:/dev/tpmrm0`, `swtpm:path=…`).
    public let tcti: String
    /// The storage primary's name at the first connection: every reconnection must find it again.
    public let primaryName: Data
    private let lock = Mutex(())
    // Mutated only under `lock`.
    private var connection: Connection

    private final class Connection {
        var tcti: OpaquePointer?
        var context: OpaquePointer?
        var primary: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        var primaryName = Data()

        deinit { close() }

        func close() {
            if let context {
                if primary != ESYS_TR(ESYS_TR_NONE) { _ = Esys_FlushContext(context, primary) }
                var closing: OpaquePointer? = context
                Esys_Finalize(&closing)
            }
            if tcti != nil { Tss2_TctiLdr_Finalize(&tcti) }
            context = nil
            tcti = nil
            primary = ESYS_TR(ESYS_TR_NONE)
        }
    }

    /// Connects to the TPM named by `tcti` and loads the storage primary.
    public init(tcti: String) throws {
        guard !tcti.isEmpty, tcti.utf8.count < 512, !tcti.contains("\0") else {
            throw TPMError(.unreachable, "the TCTI string is empty or not a TCTI configuration")
        }
        self.tcti = tcti
        connection = try Self.connect(tcti)
        primaryName = connection.primaryName
    }

    private static func connect(_ tcti: String) throws -> Connection {
        let connection = Connection()
        try check(Tss2_TctiLdr_Initialize(tcti, &connection.tcti), "connecting to the TPM at \(tcti)", .unreachable)
        try check(Esys_Initialize(&connection.context, connection.tcti, nil), "starting ESYS", .unreachable)
        guard let context = connection.context else { throw TPMError(.unreachable, "ESYS gave no context") }
        let (primary, name) = try createPrimary(context)
        connection.primary = primary
        connection.primaryName = name
        return connection
    }

    /// Runs `body` with the connection. A TPM that went away (restarted, so its transient objects are
    /// gone) is reconnected once and the operation tried again, so `body` must be safe to run twice
    /// (the counters' `advance` reads before it increments). A reconnection that finds another storage
    /// primary (the TPM cleared, or another one behind the TCTI) fails rather than go on with it.
    func run<T>(_ operation: String, _ body: (OpaquePointer, ESYS_TR) throws -> T) throws -> T {
        try lock.withLock { _ in
            if let context = connection.context {
                do {
                    return try body(context, connection.primary)
                } catch let error as TPMError
                    where (error.code == .unreachable || error.code == .missingPrimary) && !error.reachedCheck
                {
                    // Fall through to one reconnection (never after a passcode check was sent: the
                    // chip may have counted it, and a replay would count it twice).
                    _ = error
                }
            }
            connection.close()
            let fresh = try Self.connect(tcti)
            guard ConstantTime.equal(fresh.primaryName, primaryName) else {
                // Left closed: every later call connects and checks again.
                fresh.close()
                throw TPMError(
                    .foreignObject, "\(operation): the TPM at \(tcti) has another storage key since it reconnected")
            }
            connection = fresh
            guard let context = connection.context else { throw TPMError(.unreachable, "\(operation): no TPM") }
            return try body(context, connection.primary)
        }
    }

    /// Throws for a failed TSS call; `fallback` overrides the classification of transport failures.
    static func check(_ rc: TSS2_RC, _ operation: String, _ fallback: TPMError.Code? = nil) throws {
        guard rc != TSS2_RC(TSS2_RC_SUCCESS) else { return }
        let decoded = Tss2_RC_Decode(rc).map { String(cString: $0) } ?? "unknown error"
        let error = TPMError.from(rc, during: operation, decoded: decoded)
        if let fallback, error.code == .failed { throw TPMError(fallback, responseCode: rc, error.reason) }
        throw error
    }

    // MARK: Storage primary and sessions

    /// The TCG storage-root template: an ECC P-256 restricted decryption key, AES-128-CFB for its
    /// children, no dictionary-attack protection (its authorization is empty), fixed to this TPM.
    private static func createPrimary(_ context: OpaquePointer) throws -> (ESYS_TR, Data) {
        var template = eccTemplate(
            attributes: TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT, childrenEncryptedWithAES: true)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var handle = ESYS_TR(ESYS_TR_NONE)
        try check(
            Esys_CreatePrimary(
                context, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE), &sensitive, &template, &outside, &pcrs, &handle, nil, nil, nil, nil),
            "creating the storage primary")
        return (handle, try name(of: handle, context))
    }

    /// A P-256 key's template, made by the chip and fixed to it (`noDA`: its authorization is empty),
    /// with `attributes` for its use; a storage key encrypts its children with AES-128-CFB.
    static func eccTemplate(attributes: UInt32, childrenEncryptedWithAES: Bool) -> TPM2B_PUBLIC {
        var template = TPM2B_PUBLIC()
        template.publicArea.type = TPM2_ALG_ID(TPM2_ALG_ECC)
        template.publicArea.nameAlg = TPM2_ALG_ID(TPM2_ALG_SHA256)
        template.publicArea.objectAttributes = TPMA_OBJECT(
            TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN
                | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | attributes)
        var details = TPMS_ECC_PARMS()
        details.symmetric.algorithm = TPM2_ALG_ID(childrenEncryptedWithAES ? TPM2_ALG_AES : TPM2_ALG_NULL)
        if childrenEncryptedWithAES {
            details.symmetric.keyBits.aes = 128
            details.symmetric.mode.aes = TPM2_ALG_ID(TPM2_ALG_CFB)
        }
        details.scheme.scheme = TPM2_ALG_ID(TPM2_ALG_NULL)
        details.curveID = TPM2_ECC_CURVE(TPM2_ECC_NIST_P256)
        details.kdf.scheme = TPM2_ALG_ID(TPM2_ALG_NULL)
        template.publicArea.parameters.eccDetail = details
        return template
    }

    /// Creates an object under the primary from `template` and `sensitive` in `session`: the object
    /// as kept, and its public area (a key's public point).
    static func createObject(
        _ context: OpaquePointer, primary: ESYS_TR, session: ESYS_TR, sensitive: inout TPM2B_SENSITIVE_CREATE,
        template: inout TPM2B_PUBLIC, _ operation: String
    ) throws -> (object: TPMSealedObject, publicArea: TPMT_PUBLIC) {
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var privatePart: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var publicPart: UnsafeMutablePointer<TPM2B_PUBLIC>?
        try check(
            Esys_Create(
                context, primary, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &sensitive, &template,
                &outside, &pcrs, &privatePart, &publicPart, nil, nil, nil),
            operation)
        defer {
            Esys_Free(privatePart)
            Esys_Free(publicPart)
        }
        guard let privatePart, let publicPart else { throw TPMError(.failed, "\(operation): the TPM returned nothing") }
        let object = TPMSealedObject(
            publicArea: try marshal(publicPart, Tss2_MU_TPM2B_PUBLIC_Marshal),
            privateArea: try marshal(privatePart, Tss2_MU_TPM2B_PRIVATE_Marshal))
        return (object, publicPart.pointee.publicArea)
    }

    static func name(of handle: ESYS_TR, _ context: OpaquePointer) throws -> Data {
        var name: UnsafeMutablePointer<TPM2B_NAME>?
        try check(Esys_TR_GetName(context, handle, &name), "reading an object's name")
        defer { Esys_Free(name) }
        guard let name else { return Data() }
        return TPMBuffers.data(name.pointee.name, size: name.pointee.size)
    }

    /// A session salted to the primary, with AES-128-CFB parameter encryption.
    static func startSession(
        _ context: OpaquePointer, primary: ESYS_TR, type: TPM2_SE, attributes: TPMA_SESSION
    ) throws -> ESYS_TR {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2_ALG_ID(TPM2_ALG_AES)
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = TPM2_ALG_ID(TPM2_ALG_CFB)
        var session = ESYS_TR(ESYS_TR_NONE)
        try check(
            Esys_StartAuthSession(
                context, primary, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE), nil, type, &symmetric, TPM2_ALG_ID(TPM2_ALG_SHA256), &session),
            "starting a salted session")
        do {
            try check(Esys_TRSess_SetAttributes(context, session, attributes, 0xFF), "setting session attributes")
        } catch {
            _ = Esys_FlushContext(context, session)
            throw error
        }
        return session
    }

    /// Flushes a loaded object or a session; one the TPM already closed is no error.
    static func flush(_ context: OpaquePointer, _ handle: ESYS_TR) {
        guard handle != ESYS_TR(ESYS_TR_NONE) else { return }
        _ = Esys_FlushContext(context, handle)
    }
}
