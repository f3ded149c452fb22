import Foundation
import KeychainCore

/// LocalAuthentication's errors: Apple's domain and codes, bridged to `NSError` with them.
public struct LAError: Error, Hashable, Sendable, CustomNSError {
    public enum Code: Int, Sendable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case biometryNotAvailable = -6
        case biometryNotEnrolled = -7
        case biometryLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case companionNotAvailable = -11
        case biometryNotPaired = -12
        case biometryDisconnected = -13
        case invalidDimensions = -14
        case notInteractive = -1004

        // The older spellings (the same raw values).
        public static let watchNotAvailable = Code.companionNotAvailable
        @available(*, deprecated, renamed: "biometryNotAvailable")
        public static let touchIDNotAvailable = Code.biometryNotAvailable
        @available(*, deprecated, renamed: "biometryNotEnrolled")
        public static let touchIDNotEnrolled = Code.biometryNotEnrolled
        @available(*, deprecated, renamed: "biometryLockout")
        public static let touchIDLockout = Code.biometryLockout
    }

    public static let errorDomain = "com.apple.LocalAuthentication"

    public let code: Code
    /// The `NSLocalizedDescriptionKey` of the user info it was made with (the only entry kept, so
    /// that the error stays Sendable).
    private let localizedDescriptionText: String?

    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        localizedDescriptionText = userInfo[NSLocalizedDescriptionKey] as? String
    }

    public var errorUserInfo: [String: Any] {
        localizedDescriptionText.map { [NSLocalizedDescriptionKey: $0] } ?? [:]
    }

    public var errorCode: Int { code.rawValue }

    /// The keychain service's failure as the error Apple's API gives.
    init(failure: AuthenticationFailure) {
        self.init(Code(rawValue: failure.rawValue) ?? .authenticationFailed)
    }

    public static func == (lhs: LAError, rhs: LAError) -> Bool { lhs.code == rhs.code }

    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public static let authenticationFailed = Code.authenticationFailed
    public static let userCancel = Code.userCancel
    public static let userFallback = Code.userFallback
    public static let systemCancel = Code.systemCancel
    public static let passcodeNotSet = Code.passcodeNotSet
    public static let biometryNotAvailable = Code.biometryNotAvailable
    public static let biometryNotEnrolled = Code.biometryNotEnrolled
    public static let biometryLockout = Code.biometryLockout
    public static let appCancel = Code.appCancel
    public static let invalidContext = Code.invalidContext
    public static let companionNotAvailable = Code.companionNotAvailable
    public static let watchNotAvailable = Code.companionNotAvailable
    public static let biometryNotPaired = Code.biometryNotPaired
    public static let biometryDisconnected = Code.biometryDisconnected
    public static let invalidDimensions = Code.invalidDimensions
    public static let notInteractive = Code.notInteractive
}
