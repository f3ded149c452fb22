import Foundation

/// Authentication policies, with Apple's raw values.
public enum LAPolicy: Int, Sendable {
    case deviceOwnerAuthenticationWithBiometrics = 1
    case deviceOwnerAuthentication = 2
    case deviceOwnerAuthenticationWithWatch = 3
    case deviceOwnerAuthenticationWithBiometricsOrWatch = 4
    case deviceOwnerAuthenticationWithWristDetection = 5

    /// The companion spellings of the watch policies (the same raw values).
    public static let deviceOwnerAuthenticationWithCompanion = LAPolicy.deviceOwnerAuthenticationWithWatch
    public static let deviceOwnerAuthenticationWithBiometricsOrCompanion =
        LAPolicy.deviceOwnerAuthenticationWithBiometricsOrWatch
}

public enum LABiometryType: Int, Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// The operation `evaluateAccessControl(_:operation:localizedReason:reply:)` evaluates an access
/// control for (Apple's raw values).
public enum LAAccessControlOperation: Int, Sendable {
    case createItem = 0
    case useItem = 1
    case createKey = 2
    case useKeySign = 3
    case useKeyDecrypt = 4
    case useKeyKeyExchange = 5
}

/// The kinds of credential an app can give a context (Apple's raw values).
public enum LACredentialType: Int, Sendable {
    case applicationPassword = 0
    case smartCardPIN = -3
}

public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300
