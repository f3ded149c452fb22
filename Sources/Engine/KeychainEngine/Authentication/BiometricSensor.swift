import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainKeybag

/// Whatever answers "is this the enrolled user?" (the simulated sensor, a fingerprint reader through
/// fprintd, a paired companion device), as the engine asks it. The broker asks it; its enrollment
/// secret binds `biometryCurrentSet` items. Implementations live in KeychainAuthenticators.
public protocol BiometricSensor: Sendable {
    /// Whether a set is enrolled, and its domain state (changes with every enrollment).
    func enrollment() throws -> (enrolled: Bool, domainState: Data?)
    /// The secret of the enrolled set, for binding an item to it; nil when none is enrolled.
    func enrollmentSecret() throws -> SecureBytes?
    /// Asks the user; success on a match.
    func prompt(reason: String) throws -> Result<Void, AuthenticationFailure>
    /// `security biometry …`: a simulated sensor is driven; a real one only shows its status.
    func perform(_ command: BiometryCommand) throws -> BiometryStatus
    /// `LABiometryType`'s raw value when a set is enrolled.
    var biometryType: Int { get }
}

/// Whatever asks a person for the device passcode (an access control's `devicePasscode`,
/// `userPresence` without biometry, a tool's approval).
public protocol PasscodePrompt: Sendable {
    /// The passcode typed, in wiped memory; a failure when the person cancelled or nobody answered.
    func askPasscode(reason: String) -> Result<SecureBytes, AuthenticationFailure>
    /// The same, offered `terminal` (a `/dev/pts/N` of the person asking) for when no graphical
    /// session can show the prompt.
    func askPasscode(reason: String, terminal: String?) -> Result<SecureBytes, AuthenticationFailure>
}

extension PasscodePrompt {
    /// A prompt that cannot use a terminal asks as it always does.
    public func askPasscode(reason: String, terminal: String?) -> Result<SecureBytes, AuthenticationFailure> {
        askPasscode(reason: reason)
    }
}

/// What an authenticator is made for: the keychain directory it keeps its state in, and the keybag
/// whose device root seals that state.
public struct AuthenticatorHost: Sendable {
    public let directory: String
    public let keybag: Keybag
}

/// The authenticators a keychain asks, made when it opens (they need its directory and keybag).
/// The engine knows them only by these protocols; KeychainAuthenticators makes the real ones.
public struct Authenticators: Sendable {
    public var biometry: @Sendable (AuthenticatorHost) -> any BiometricSensor
    /// A paired companion device (Apple's watch); nil when none can be.
    public var companion: (@Sendable (AuthenticatorHost) -> any BiometricSensor)?
    /// The passcode prompt; nil: the passcode cannot be asked for.
    public var passcodePrompt: (any PasscodePrompt)?

    public init(
        biometry: @escaping @Sendable (AuthenticatorHost) -> any BiometricSensor,
        companion: (@Sendable (AuthenticatorHost) -> any BiometricSensor)? = nil,
        passcodePrompt: (any PasscodePrompt)? = nil
    ) {
        self.biometry = biometry
        self.companion = companion
        self.passcodePrompt = passcodePrompt
    }

    /// No sensor (nothing is ever enrolled), no companion, no prompt.
    public static let none = Authenticators(biometry: { _ in NoBiometricSensor() })
}

/// A device without biometry: nothing enrolled, every prompt `biometryNotAvailable`.
struct NoBiometricSensor: BiometricSensor {
    func enrollment() throws -> (enrolled: Bool, domainState: Data?) { (false, nil) }
    func enrollmentSecret() throws -> SecureBytes? { nil }
    func prompt(reason: String) throws -> Result<Void, AuthenticationFailure> { .failure(.biometryNotAvailable) }
    func perform(_ command: BiometryCommand) throws -> BiometryStatus {
        switch command {
        case .status:
            return BiometryStatus(enrolled: false, pendingAnswers: [], standingAnswer: nil, domainState: nil)
        default: throw KeychainError.unimplemented("this keychain has no biometric sensor")
        }
    }
    var biometryType: Int { 0 }
}
