import FoundationEssentials

/// Why a keychain operation failed: a code, which callers compare and the `Security` facade turns into
/// Apple's OSStatus, and a reason for logs and messages, which never contains a secret.
///
/// Errors are equal when their codes are: the reason explains, it does not distinguish.
public struct KeychainError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong: each code is one of Apple's OSStatus values (`KeychainError.osStatus` in the
    /// `Security` module). The daemon's frames carry a code by its raw value, a name, not a number.
    public enum Code: String, Sendable, CaseIterable {
        /// errSecParam (-50): a malformed query, wrong value type, or forbidden combination.
        case invalidParameter
        /// errSecNoSuchAttr (-25303): a 4-letter key that is not an attribute of the class.
        case noSuchAttribute
        /// errSecNoSuchClass (-25306).
        case noSuchClass
        /// errSecDuplicateItem (-25299).
        case duplicateItem
        /// errSecItemNotFound (-25300).
        case itemNotFound
        /// errSecInteractionNotAllowed (-25308): the protection class is locked, or a delay runs.
        case interactionNotAllowed
        /// errSecNotAvailable (-25291): no usable keychain, or a class that does not exist now.
        case notAvailable
        /// errSecMissingEntitlement (-34018).
        case missingEntitlement
        /// errSecUnimplemented (-4).
        case unimplemented
        /// errSecAuthFailed (-25293): a wrong passcode, or an access control the user did not satisfy.
        case authenticationFailed
        /// errSecUserCanceled (-128): the user canceled an authentication an access control asked for.
        case userCanceled
        /// errSecIO (-36).
        case ioError
        /// errSecReadOnly (-25292).
        case readOnly
        /// errSecDiskFull (-34).
        case diskFull
        /// errSecAllocate (-108).
        case allocationFailed
        /// errSecInternalComponent (-2070): a failure inside the engine that is not the caller's doing.
        case internalError
        /// errSecDecode (-26275): bytes that are not what they claim (a damaged or foreign backup file).
        case decode
    }

    /// What callers compare.
    public let code: Code
    /// Why, for a person reading a log or a message: never a secret, an attribute value or a group.
    public let reason: String

    /// An error with its code and its reason.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The reason, for messages.
    public var message: String { reason }

    /// The code's name and the reason, for logs.
    public var description: String { "\(code.rawValue): \(reason)" }

    /// Compares codes only: the reason explains, it does not distinguish.
    public static func == (lhs: KeychainError, rhs: KeychainError) -> Bool { lhs.code == rhs.code }

    // One constructor per code, so that a throw reads as its status; the codes say what each means.

    /// An `invalidParameter` error.
    public static func invalidParameter(_ reason: String) -> KeychainError { .init(.invalidParameter, reason) }
    /// A `noSuchAttribute` error.
    public static func noSuchAttribute(_ reason: String) -> KeychainError { .init(.noSuchAttribute, reason) }
    /// A `noSuchClass` error.
    public static func noSuchClass(_ reason: String) -> KeychainError { .init(.noSuchClass, reason) }
    /// The `duplicateItem` error: the reason needs nothing from the item.
    public static let duplicateItem = KeychainError(.duplicateItem, "the item already exists")
    /// The `itemNotFound` error: the reason needs nothing from the query.
    public static let itemNotFound = KeychainError(.itemNotFound, "no item matches the query")
    /// An `interactionNotAllowed` error.
    public static func interactionNotAllowed(_ reason: String) -> KeychainError {
        .init(.interactionNotAllowed, reason)
    }
    /// A `notAvailable` error.
    public static func notAvailable(_ reason: String) -> KeychainError { .init(.notAvailable, reason) }
    /// A `missingEntitlement` error.
    public static func missingEntitlement(_ reason: String) -> KeychainError { .init(.missingEntitlement, reason) }
    /// An `unimplemented` error.
    public static func unimplemented(_ reason: String) -> KeychainError { .init(.unimplemented, reason) }
    /// An `authenticationFailed` error.
    public static func authenticationFailed(_ reason: String) -> KeychainError {
        .init(.authenticationFailed, reason)
    }
    /// A `userCanceled` error.
    public static func userCanceled(_ reason: String) -> KeychainError { .init(.userCanceled, reason) }
    /// An `ioError` error.
    public static func ioError(_ reason: String) -> KeychainError { .init(.ioError, reason) }
    /// A `readOnly` error.
    public static func readOnly(_ reason: String) -> KeychainError { .init(.readOnly, reason) }
    /// The `diskFull` error.
    public static let diskFull = KeychainError(.diskFull, "the disk is full")
    /// The `allocationFailed` error.
    public static let allocationFailed = KeychainError(.allocationFailed, "out of memory")
    /// An `internalError` error.
    public static func internalError(_ reason: String) -> KeychainError { .init(.internalError, reason) }
    /// A `decode` error.
    public static func decode(_ reason: String) -> KeychainError { .init(.decode, reason) }
}
