import Foundation

/// `LAPolicy`, as the service sees it (Apple's raw values).
public enum AuthenticationPolicy: Int, Sendable, CaseIterable {
    case biometrics = 1
    case ownerAuthentication = 2
    case companion = 3
    case biometricsOrCompanion = 4
    case wristDetection = 5

    /// The factors the policy accepts.
    public var constraint: AccessConstraint {
        switch self {
        case .biometrics: .biometryAny
        case .ownerAuthentication: .userPresence
        case .companion, .wristDetection: .companion
        case .biometricsOrCompanion: .any([.biometryAny, .companion])
        }
    }
}

/// Why an evaluation did not succeed: `LAError.Code`'s raw values, so the `LocalAuthentication`
/// module and the daemon speak the same numbers.
public enum AuthenticationFailure: Int, Error, Sendable, CaseIterable {
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
    case notInteractive = -1004

    /// What a SecItem call that needed this authentication returns (Apple's mapping): a cancel is
    /// errSecUserCanceled, asking that was not allowed errSecInteractionNotAllowed, anything else
    /// errSecAuthFailed.
    public var keychainError: KeychainError {
        switch self {
        case .userCancel, .appCancel, .systemCancel, .userFallback:
            KeychainError.userCanceled("the user canceled the authentication")
        case .notInteractive:
            KeychainError.interactionNotAllowed("authentication is needed but interaction is not allowed")
        default:
            KeychainError.authenticationFailed("authentication failed (\(self))")
        }
    }
}

/// What the service did with an authentication request.
public struct AuthenticationOutcome: Sendable, Equatable {
    /// Nil on success.
    public var failure: AuthenticationFailure?
    /// `LAContext.evaluatedPolicyDomainState`: a digest of the enrolled biometry, nil when none.
    public var domainState: Data?
    /// `LABiometryType`'s raw value for what is available (0: none).
    public var biometryType: Int

    public init(failure: AuthenticationFailure?, domainState: Data?, biometryType: Int) {
        self.failure = failure
        self.domainState = domainState
        self.biometryType = biometryType
    }
}

/// `LAContext` asking the service: whether a policy could be evaluated, to evaluate it, or to
/// evaluate an access control for an operation.
public struct AuthenticationRequest: Sendable {
    public enum Subject: Sendable {
        case policy(AuthenticationPolicy)
        case accessControl(AccessControlPolicy)
    }

    public var context: AuthenticationContextReference
    public var subject: Subject
    /// Only say whether it could be evaluated (`canEvaluatePolicy`); nobody is asked.
    public var preflight: Bool
    public var reason: String

    public init(context: AuthenticationContextReference, subject: Subject, preflight: Bool, reason: String) {
        self.context = context
        self.subject = subject
        self.preflight = preflight
        self.reason = reason
    }
}

/// The simulated sensors, driven as the iOS Simulator's Face ID menu drives its own (`security
/// biometry …`).
public enum BiometryCommand: Sendable, Equatable {
    /// Enrolls a new set (a new enrollment: items bound to the old set die).
    case enroll
    /// Removes the enrolled set (items bound to it die).
    case unenroll
    /// Answers the next prompt (now, or the one being waited for).
    case answer(SensorAnswer)
    /// Answers every prompt this way until changed; nil: prompts wait for an answer.
    case standingAnswer(SensorAnswer?)
    case status
}

extension BiometryCommand: CustomStringConvertible {
    /// As `security biometry` spells it, for the daemon's log.
    public var description: String {
        switch self {
        case .enroll: "enroll"
        case .unenroll: "unenroll"
        case .answer(let answer): answer.rawValue
        case .standingAnswer(let answer): "policy \(answer?.rawValue ?? "ask")"
        case .status: "status"
        }
    }
}

/// Codable: the simulated sensor keeps its pending answers in a JSON state file.
public enum SensorAnswer: String, Sendable, CaseIterable, Codable {
    case match, nomatch, cancel
}

/// The simulated sensor's state, for `security biometry status`.
public struct BiometryStatus: Sendable, Equatable {
    public var enrolled: Bool
    public var pendingAnswers: [SensorAnswer]
    public var standingAnswer: SensorAnswer?
    public var domainState: Data?

    public init(enrolled: Bool, pendingAnswers: [SensorAnswer], standingAnswer: SensorAnswer?, domainState: Data?) {
        self.enrolled = enrolled
        self.pendingAnswers = pendingAnswers
        self.standingAnswer = standingAnswer
        self.domainState = domainState
    }
}
