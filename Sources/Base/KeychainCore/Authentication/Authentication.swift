import FoundationEssentials

/// `LAPolicy`, as the service sees it (Apple's raw values).
public enum AuthenticationPolicy: Int, Sendable, CaseIterable {
    /// `deviceOwnerAuthenticationWithBiometrics`: any enrolled biometry.
    case biometrics = 1
    /// `deviceOwnerAuthentication`: biometry, else the device passcode.
    case ownerAuthentication = 2
    /// `deviceOwnerAuthenticationWithCompanion` (`…WithWatch`): a paired companion device.
    case companion = 3
    /// `deviceOwnerAuthenticationWithBiometricsOrCompanion`: either.
    case biometricsOrCompanion = 4
    /// `deviceOwnerAuthenticationWithWristDetection`: answered by the companion device, as the
    /// companion policy is.
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
    /// The user was asked and did not match (a wrong face, a wrong passcode).
    case authenticationFailed = -1
    /// The user canceled the prompt.
    case userCancel = -2
    /// The user chose the fallback instead of answering (Apple's code; a SecItem call takes it as a
    /// cancel).
    case userFallback = -3
    /// The prompt ended without an answer (nobody answered the simulated sensor in time, the reader
    /// went away); a SecItem call takes it as a cancel.
    case systemCancel = -4
    /// The policy needs a device passcode and the keychain has none.
    case passcodeNotSet = -5
    /// No biometric sensor can answer (fprintd unreachable, the reader busy or gone).
    case biometryNotAvailable = -6
    /// The sensor has no enrolled set.
    case biometryNotEnrolled = -7
    /// Biometry is locked out (Apple's code, kept so that the numbers match; no sensor here locks out).
    case biometryLockout = -8
    /// The app ended the evaluation (Apple's code; a SecItem call takes it as a cancel).
    case appCancel = -9
    /// The context was invalidated, or cannot be evaluated as it is (an empty reason).
    case invalidContext = -10
    /// No companion device is simulated, or none is paired.
    case companionNotAvailable = -11
    /// Asking the user was needed but not allowed (`interactionNotAllowed`).
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

    /// An outcome as the service reports it; `LAContext` keeps the domain state and biometry type.
    public init(failure: AuthenticationFailure?, domainState: Data?, biometryType: Int) {
        self.failure = failure
        self.domainState = domainState
        self.biometryType = biometryType
    }
}

/// `LAContext` asking the service: whether a policy could be evaluated, to evaluate it, or to
/// evaluate an access control for an operation.
public struct AuthenticationRequest: Sendable {
    /// What is evaluated.
    public enum Subject: Sendable {
        /// A policy (`evaluatePolicy`, `canEvaluatePolicy`).
        case policy(AuthenticationPolicy)
        /// An access control's constraints (`evaluateAccessControl`).
        case accessControl(AccessControlPolicy)
    }

    /// The context whose evaluation this is: a success is kept under its identifier, for later calls
    /// that name it.
    public var context: AuthenticationContextReference
    /// The policy or access control evaluated.
    public var subject: Subject
    /// Only say whether it could be evaluated (`canEvaluatePolicy`); nobody is asked.
    public var preflight: Bool
    /// `localizedReason`: what the prompt tells the user the app wants.
    public var reason: String

    /// A request for `context`; the service, not the request, decides whether it succeeded.
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
    /// Changes nothing: the answer is the state (`security biometry status`).
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
    /// The face (or finger, or companion) matches: the evaluation succeeds.
    case match
    /// It does not match: `errSecAuthFailed`, `LAError.authenticationFailed`.
    case nomatch
    /// The user cancels: `errSecUserCanceled`, `LAError.userCancel`.
    case cancel
}

/// The simulated sensor's state, for `security biometry status`.
public struct BiometryStatus: Sendable, Equatable {
    /// Whether a set is enrolled (for the companion: whether it is paired).
    public var enrolled: Bool
    /// Answers queued for the next prompts, oldest first.
    public var pendingAnswers: [SensorAnswer]
    /// The answer every prompt gets while no answer is queued; nil: prompts wait for one.
    public var standingAnswer: SensorAnswer?
    /// A digest of the enrolled set (`evaluatedPolicyDomainState`): it changes with every enrollment
    /// and reveals nothing of it. Nil when nothing is enrolled.
    public var domainState: Data?

    /// A state as the sensor reports it.
    public init(enrolled: Bool, pendingAnswers: [SensorAnswer], standingAnswer: SensorAnswer?, domainState: Data?) {
        self.enrolled = enrolled
        self.pendingAnswers = pendingAnswers
        self.standingAnswer = standingAnswer
        self.domainState = domainState
    }
}
