import Foundation

/// Why a keychain operation failed: a code, which callers compare and the `Security` facade turns into
/// Apple's OSStatus, and a reason for logs and messages, which never contains a secret.
///
/// Errors are equal when their codes are: the reason explains, it does not distinguish.
public struct KeychainError: Error, Sendable, Equatable, CustomStringConvertible {
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
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The reason, for messages.
    public var message: String { reason }

    public var description: String { "\(code.rawValue): \(reason)" }

    public static func == (lhs: KeychainError, rhs: KeychainError) -> Bool { lhs.code == rhs.code }

    public static func invalidParameter(_ reason: String) -> KeychainError { .init(.invalidParameter, reason) }
    public static func noSuchAttribute(_ reason: String) -> KeychainError { .init(.noSuchAttribute, reason) }
    public static func noSuchClass(_ reason: String) -> KeychainError { .init(.noSuchClass, reason) }
    public static let duplicateItem = KeychainError(.duplicateItem, "the item already exists")
    public static let itemNotFound = KeychainError(.itemNotFound, "no item matches the query")
    public static func interactionNotAllowed(_ reason: String) -> KeychainError {
        .init(.interactionNotAllowed, reason)
    }
    public static func notAvailable(_ reason: String) -> KeychainError { .init(.notAvailable, reason) }
    public static func missingEntitlement(_ reason: String) -> KeychainError { .init(.missingEntitlement, reason) }
    public static func unimplemented(_ reason: String) -> KeychainError { .init(.unimplemented, reason) }
    public static func authenticationFailed(_ reason: String) -> KeychainError {
        .init(.authenticationFailed, reason)
    }
    public static func userCanceled(_ reason: String) -> KeychainError { .init(.userCanceled, reason) }
    public static func ioError(_ reason: String) -> KeychainError { .init(.ioError, reason) }
    public static func readOnly(_ reason: String) -> KeychainError { .init(.readOnly, reason) }
    public static let diskFull = KeychainError(.diskFull, "the disk is full")
    public static let allocationFailed = KeychainError(.allocationFailed, "out of memory")
    public static func internalError(_ reason: String) -> KeychainError { .init(.internalError, reason) }
}
