/// Why the TPM, or the software stack in front of it, refused: a code to compare by and a reason to log.
public struct TPMError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable, Equatable {
        /// The TCTI string names no usable TPM, or the TPM does not answer.
        case unreachable
        /// A wrong authorization value (a wrong passcode on a dictionary-attack-protected object).
        case authorizationFailed
        /// The dictionary-attack protection is in lockout: no authorization of a protected object is
        /// checked until it lifts.
        case lockout
        /// A policy the object or index demands is not met (a counter moved on).
        case policyFailed
        /// A blob this TPM did not make, or made under a primary that no longer exists (a cleared TPM).
        case foreignObject
        /// An NV index or persistent object the keychain relies on is not there.
        case missing
        /// The storage primary this connection loaded is gone (the TPM restarted).
        case missingPrimary
        /// An NV index already exists at the handle.
        case alreadyDefined
        /// Any other refusal.
        case failed
    }

    public let code: Code
    /// The TSS response code, 0 when the error did not come from the stack.
    public let responseCode: UInt32
    public let reason: String
    /// The command that checks an authorization of a dictionary-attack-protected object was sent:
    /// the chip may have counted it, whatever came back.
    public internal(set) var reachedCheck = false

    public init(_ code: Code, responseCode: UInt32 = 0, _ reason: String) {
        self.code = code
        self.responseCode = responseCode
        self.reason = reason
    }

    /// The chip judged the object or its authorization (rather than failing to answer).
    public var isRefusal: Bool { [.authorizationFailed, .policyFailed, .foreignObject].contains(code) }

    /// A TPM warning (format 0, `0x9xx`): a transient state (memory, retry, NV rate), not a judgement
    /// of the object.
    var isWarning: Bool { responseCode & 0xFF_0000 == 0 && responseCode & 0xF80 == 0x900 }

    public var description: String { reason }
}

extension TPMError {
    /// Classifies a TSS response code from `operation`, keeping the stack's own text for the log.
    static func from(_ rc: UInt32, during operation: String, decoded: String) -> TPMError {
        let layer = rc & 0xFF_0000
        let base = rc & 0xFFFF
        // Format-one codes carry a handle, session or parameter number in bits 6 and 8–11.
        let number = base & 0x80 != 0 ? base & 0xBF : base
        let code: Code
        if layer == 0 {
            switch number {
            case 0x08E, 0x0A2: code = .authorizationFailed  // AUTH_FAIL, BAD_AUTH
            case 0x921: code = .lockout
            case 0x09D, 0x126: code = .policyFailed  // POLICY_FAIL, POLICY
            case 0x09F, 0x095: code = .foreignObject  // INTEGRITY, SIZE of an edited blob
            case 0x14A: code = .missing  // NV_UNINITIALIZED
            case 0x08B: code = .missingPrimary  // HANDLE: a transient handle the TPM no longer has
            case 0x14C: code = .alreadyDefined  // NV_DEFINED
            default: code = .failed
            }
        } else if base == 0x00A || base == 0x008 {
            // The TCTI or ESYS could not reach the TPM (TSS2_BASE_RC_IO_ERROR, NO_CONNECTION).
            code = .unreachable
        } else {
            code = .failed
        }
        return TPMError(code, responseCode: rc, "\(operation): \(decoded) (0x\(String(rc, radix: 16)))")
    }
}
