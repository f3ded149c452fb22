import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto

/// Whatever answers "is this the enrolled user?": the simulated sensor, or a real reader through
/// fprintd. The broker asks it; its enrollment secret binds `biometryCurrentSet` items.
protocol BiometricSensor: Sendable {
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

extension SimulatedBiometry: BiometricSensor {
    /// Face ID, as the iOS Simulator's default device has.
    var biometryType: Int { 2 }
}

/// Which biometric authenticator a keychain uses.
public enum BiometricSensorChoice: Sendable, Equatable {
    /// The simulated sensor, driven by `security biometry` (the default: tests and development).
    case simulated
    /// A fingerprint reader through fprintd on the bus at `bus` (a D-Bus address), verifying the
    /// fingers of `username`.
    case fprintd(bus: String, username: String)
}
