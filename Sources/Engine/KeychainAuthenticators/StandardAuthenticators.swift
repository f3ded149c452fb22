import KeychainEngine

/// Which biometric authenticator a keychain uses.
public enum BiometricSensorChoice: Sendable, Equatable {
    /// The simulated sensor, driven by `security biometry` (the default: tests and development).
    case simulated
    /// A fingerprint reader through fprintd on the bus at `bus` (a D-Bus address), verifying the
    /// fingers of `username`.
    case fprintd(bus: String, username: String)
}

extension Authenticators {
    /// The authenticators of this project: the simulated sensor or fprintd for biometry, the simulated
    /// companion when asked for (off by default: anyone who can drive it satisfies every ACL with a
    /// companion alternative), and `pinentry` for the passcode when a program is given.
    ///
    /// - Parameters:
    ///   - biometryAnswerWait: how long a biometry prompt waits for the simulated sensor to be answered
    ///     when no answer is queued or standing (`security biometry`), or for fprintd's verdict.
    ///   - passcodePromptWait: how long a person has to answer the passcode prompt before it counts as
    ///     a cancel.
    public static func standard(
        sensor: BiometricSensorChoice = .simulated, simulatedCompanion: Bool = false, pinentryProgram: String? = nil,
        biometryAnswerWait: Duration = .seconds(30), passcodePromptWait: Duration = .seconds(120)
    ) -> Authenticators {
        let biometry: @Sendable (AuthenticatorHost) -> any BiometricSensor = { host in
            switch sensor {
            case .simulated:
                return SimulatedBiometry(directory: host.directory, keybag: host.keybag, answerWait: biometryAnswerWait)
            case .fprintd(let bus, let username):
                return FprintdSensor(
                    address: bus, username: username, directory: host.directory, keybag: host.keybag,
                    answerWait: biometryAnswerWait)
            }
        }
        let companion: @Sendable (AuthenticatorHost) -> any BiometricSensor = { host in
            SimulatedBiometry(
                directory: host.directory, keybag: host.keybag, answerWait: biometryAnswerWait, device: .companion)
        }
        return Authenticators(
            biometry: biometry, companion: simulatedCompanion ? companion : nil,
            passcodePrompt: pinentryProgram.map { PinentryPrompt(program: $0, timeout: passcodePromptWait) })
    }
}

extension KeychainOptions {
    /// How the embedded keychain and the daemon's tenants open a keychain, in one place: the root
    /// where it is kept, the standard authenticators (fprintd when a bus and user are given, else
    /// the simulated sensor), and the connections kept for reads. Each then says who owns the
    /// directory (the daemon) or where a session unlock is held (embedded).
    public static func standard(
        deviceRootPath: String?, pinentryProgram: String?, fprintd: (bus: String, username: String)?,
        simulatedCompanion: Bool, idleConnections: Int
    ) -> KeychainOptions {
        KeychainOptions(
            deviceRootPath: deviceRootPath, idleConnections: idleConnections,
            authenticators: .standard(
                sensor: fprintd.map { .fprintd(bus: $0.bus, username: $0.username) } ?? .simulated,
                simulatedCompanion: simulatedCompanion, pinentryProgram: pinentryProgram))
    }
}
