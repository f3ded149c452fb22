import KeychainCore

/// Why a Secret Service call failed: a code, which is the D-Bus error name the caller receives, and a
/// reason for people (never a secret).
struct SecretServiceError: Error {
    enum Code: String {
        case isLocked = "org.freedesktop.Secret.Error.IsLocked"
        case noSession = "org.freedesktop.Secret.Error.NoSession"
        case noSuchObject = "org.freedesktop.Secret.Error.NoSuchObject"
        case accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
        case invalidArguments = "org.freedesktop.DBus.Error.InvalidArgs"
        case unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        case unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
        case propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
        case notSupported = "org.freedesktop.DBus.Error.NotSupported"
        case limitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded"
        case failed = "org.freedesktop.DBus.Error.Failed"
    }

    let code: Code
    let reason: String

    init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The keychain's refusal as the bus says it: a locked keychain is `IsLocked`, a missing item
    /// `NoSuchObject`, a refused caller `AccessDenied`, bad input `InvalidArgs`.
    init(_ error: KeychainError) {
        switch error.code {
        case .interactionNotAllowed: self.init(.isLocked, error.reason)
        case .itemNotFound: self.init(.noSuchObject, error.reason)
        case .missingEntitlement, .authenticationFailed, .userCanceled: self.init(.accessDenied, error.reason)
        case .invalidParameter, .duplicateItem, .noSuchAttribute, .decode: self.init(.invalidArguments, error.reason)
        default: self.init(.failed, error.reason)
        }
    }
}
