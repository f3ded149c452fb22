import Foundation
@_exported import Security

/// Authentication policies, with Apple's raw values.
public enum LAPolicy: Int, Sendable {
    case deviceOwnerAuthenticationWithBiometrics = 1
    case deviceOwnerAuthentication = 2
    case deviceOwnerAuthenticationWithWatch = 3
    case deviceOwnerAuthenticationWithBiometricsOrWatch = 4
}

public enum LABiometryType: Int, Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// LocalAuthentication's error domain and codes (Apple's values).
public struct LAError: Error, Hashable, Sendable {
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
        case notInteractive = -1004
    }

    public static let errorDomain = "com.apple.LocalAuthentication"

    public let code: Code

    public init(_ code: Code) { self.code = code }

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
    public static let notInteractive = Code.notInteractive
}

/// An authentication context. Until the access-control work lands there is no authenticator behind
/// it: policy evaluation reports that biometry and the device passcode are not available here.
public final class LAContext: SecAuthenticationContextObject, @unchecked Sendable {
    public var localizedReason: String = ""
    public var localizedFallbackTitle: String?
    public var localizedCancelTitle: String?
    public var interactionNotAllowed: Bool = false
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval = 0
    public private(set) var biometryType: LABiometryType = .none
    private var invalidated = false
    /// Names this context to the keychain service.
    public let contextIdentifier = UUID()

    public init() {}

    public func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        let code: LAError.Code = invalidated ? .invalidContext : unavailableCode(for: policy)
        error?.pointee = NSError(domain: LAError.errorDomain, code: code.rawValue)
        return false
    }

    public func evaluatePolicy(
        _ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        let code: LAError.Code = invalidated ? .invalidContext : unavailableCode(for: policy)
        reply(false, LAError(code))
    }

    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        throw LAError(invalidated ? .invalidContext : unavailableCode(for: policy))
    }

    public func invalidate() { invalidated = true }

    private func unavailableCode(for policy: LAPolicy) -> LAError.Code {
        policy == .deviceOwnerAuthentication ? .passcodeNotSet : .biometryNotAvailable
    }
}

public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300
