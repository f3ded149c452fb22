import Foundation

/// Why a keychain operation failed. The `Security` facade turns each case into Apple's OSStatus; the
/// message says what was wrong for logs and `SecCopyErrorMessageString`-style reports, and never
/// contains a secret.
public enum KeychainError: Error, Equatable, Sendable {
    /// errSecParam (-50): a malformed query, wrong value type, or forbidden combination.
    case invalidParameter(String)
    /// errSecNoSuchAttr (-25303): a 4-letter key that is not an attribute of the class.
    case noSuchAttribute(String)
    /// errSecNoSuchClass (-25306).
    case noSuchClass(String)
    /// errSecDuplicateItem (-25299).
    case duplicateItem
    /// errSecItemNotFound (-25300).
    case itemNotFound
    /// errSecInteractionNotAllowed (-25308): the protection class is locked.
    case interactionNotAllowed(String)
    /// errSecNotAvailable (-25291): no usable keychain, or a class that does not exist now.
    case notAvailable(String)
    /// errSecMissingEntitlement (-34018).
    case missingEntitlement(String)
    /// errSecUnimplemented (-4).
    case unimplemented(String)
    /// errSecAuthFailed (-25293): a wrong passcode.
    case authenticationFailed(String)
    /// errSecIO (-36).
    case ioError(String)
    /// errSecReadOnly (-25292).
    case readOnly(String)
    /// errSecDiskFull (-34).
    case diskFull
    /// errSecAllocate (-108).
    case allocationFailed
    /// errSecInternalComponent (-2070): a failure inside the engine that is not the caller's doing.
    case internalError(String)

    public var message: String {
        switch self {
        case .invalidParameter(let text), .noSuchAttribute(let text), .noSuchClass(let text),
            .interactionNotAllowed(let text), .notAvailable(let text), .missingEntitlement(let text),
            .unimplemented(let text), .authenticationFailed(let text), .ioError(let text), .readOnly(let text),
            .internalError(let text):
            text
        case .duplicateItem: "the item already exists"
        case .itemNotFound: "no item matches the query"
        case .diskFull: "the disk is full"
        case .allocationFailed: "out of memory"
        }
    }
}
