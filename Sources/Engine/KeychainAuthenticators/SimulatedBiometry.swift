import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainKeybag
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A biometric sensor simulated the way the iOS Simulator's Face ID menu simulates one: enrolled or
/// not, and answered by whoever drives it (`security biometry match | nomatch | cancel`, or a standing
/// answer for tests that run unattended).
///
/// Its state is the file `biometry` in the keychain directory (0600): whether a set is enrolled, the
/// answers queued for the next prompts, a standing answer, and the enrollment secret, sealed under a
/// key the device root derives (so a copy of the directory without its root does not have it). Every
/// enrollment makes a new secret; items bound to the current set (`biometryCurrentSet`) have it mixed
/// into their key, so they die with it. The file is the keychain user's: in embedded and user-daemon
/// modes a process of that user can answer the sensor itself (docs/access-control.md says so); in
/// system mode only the daemon's user can.
final class SimulatedBiometry: BiometricSensor, Sendable {
    private let path: String
    private let directory: String
    private let keybag: Keybag
    /// How long a prompt with no answer waits for one (a person running `security biometry match`).
    let answerWait: Duration

    /// What the simulation stands for: the biometric sensor (file `biometry`), or a paired companion
    /// device such as a watch (file `companion`; "enrolled" means paired).
    enum Device: String, Sendable {
        case biometry
        case companion
    }

    let device: Device

    /// Face ID, as the iOS Simulator's default device has.
    var biometryType: Int { 2 }

    init(directory: String, keybag: Keybag, answerWait: Duration, device: Device = .biometry) {
        self.directory = directory
        self.device = device
        self.path = PathText.join(directory, device.rawValue)
        self.keybag = keybag
        self.answerWait = answerWait
    }

    private struct State: Codable, Equatable {
        var enrolled = false
        var sealedEnrollment: Data?
        var pending: [SensorAnswer] = []
        var standing: SensorAnswer?
    }

    // MARK: Driving the sensor

    func perform(_ command: BiometryCommand) throws -> BiometryStatus {
        let wrapKey = try enrollmentKey()
        let state = try modify { state in
            switch command {
            case .enroll:
                let secret = try SecureBytes(randomCount: 32)
                state.enrolled = true
                state.sealedEnrollment = try AESGCM.seal(secret, key: wrapKey, authenticating: enrollmentAAD)
                state.pending = []
            case .unenroll:
                state = State(standing: state.standing)
            case .answer(let answer):
                guard state.pending.count < 64 else {
                    throw KeychainError.invalidParameter("64 answers are already waiting for prompts")
                }
                state.pending.append(answer)
            case .standingAnswer(let answer):
                state.standing = answer
            case .status:
                break
            }
        }
        return BiometryStatus(
            enrolled: state.enrolled, pendingAnswers: state.pending, standingAnswer: state.standing,
            domainState: try domainState(of: state, key: wrapKey))
    }

    /// Whether a set is enrolled, and its domain state (`evaluatedPolicyDomainState`).
    func enrollment() throws -> (enrolled: Bool, domainState: Data?) {
        let state = try read()
        return (state.enrolled, try domainState(of: state, key: try enrollmentKey()))
    }

    /// The secret of the enrolled set, for binding an item to it; nil when none is enrolled.
    func enrollmentSecret() throws -> SecureBytes? {
        let state = try read()
        guard state.enrolled, let sealed = state.sealedEnrollment else { return nil }
        do {
            return try AESGCM.openSecure(sealed, key: try enrollmentKey(), authenticating: enrollmentAAD)
        } catch {
            throw KeychainError.authenticationFailed("the biometry enrollment does not open with this device root")
        }
    }

    // MARK: A prompt

    /// Asks the sensor: the next queued answer, else the standing one, else waits for one to be
    /// queued (up to `answerWait`). Not enrolled: `.biometryNotEnrolled`.
    func prompt(reason: String) throws -> Result<Void, AuthenticationFailure> {
        let deadline = ContinuousClock.now + answerWait
        var announced = false
        while true {
            var answer: SensorAnswer?
            var enrolled = false
            _ = try modify { state in
                enrolled = state.enrolled
                guard enrolled else { return }
                if !state.pending.isEmpty {
                    answer = state.pending.removeFirst()
                } else {
                    answer = state.standing
                }
            }
            guard enrolled else { return .failure(.biometryNotEnrolled) }
            switch answer {
            case .match?: return .success(())
            case .nomatch?: return .failure(.authenticationFailed)
            case .cancel?: return .failure(.userCancel)
            case nil:
                guard ContinuousClock.now < deadline else { return .failure(.systemCancel) }
                if !announced {
                    // Says that something waits, never what for beyond the app's own reason.
                    KeychainLog.error(
                        "\(device.rawValue) prompt (\(Self.printable(reason))): waiting for `security \(device.rawValue) match|nomatch|cancel`"
                    )
                    announced = true
                }
                usleep(50_000)
            }
        }
    }

    /// The app's reason as one short line: a reason is the caller's text, and the log is the operator's.
    private static func printable(_ reason: String) -> String {
        guard !reason.isEmpty else { return "no reason given" }
        let scalars = reason.unicodeScalars.prefix(120).map { scalar -> String in
            scalar.properties.generalCategory == .control || scalar == "\u{2028}" || scalar == "\u{2029}"
                ? "?" : String(scalar)
        }
        return "\"" + scalars.joined() + (reason.unicodeScalars.count > 120 ? "…" : "") + "\""
    }

    // MARK: The file

    private var enrollmentAAD: Data { Data("swift-keychain \(device.rawValue) enrollment v1".utf8) }

    /// The key the enrollment secret is sealed under: derived by the device root, never stored.
    private func enrollmentKey() throws -> SecureBytes {
        var mac = try keybag.authenticate(Data("swift-keychain \(device.rawValue) enrollment key v1".utf8))
        defer { mac.resetBytes(in: 0..<mac.count) }
        return SecureBytes(copying: mac)
    }

    /// A digest of the enrolled set that changes with every enrollment and reveals nothing of its secret.
    private func domainState(of state: State, key: SecureBytes) throws -> Data? {
        guard state.enrolled, let sealed = state.sealedEnrollment else { return nil }
        let secret = try AESGCM.openSecure(sealed, key: key, authenticating: enrollmentAAD)
        return try HMACKey(key: secret, pinned: false).authenticationCode(Data("domain state".utf8))
    }

    /// The state as the file holds it now, read afresh every time: another process (the user's
    /// `security biometry`, or another keychain process) may have changed it, and a cache validated by
    /// the file's identity can be fooled by a reused inode or a network file system's attribute cache.
    private func read() throws -> State {
        let data: Data?
        do {
            data = try SecureFiles.read(path)
        } catch {
            throw KeychainError.notAvailable("cannot read the biometry state: \(error)")
        }
        guard let data else { return State() }
        do {
            return try JSONDecoder().decode(State.self, from: data)
        } catch {
            throw KeychainError.notAvailable("the biometry state file is damaged")
        }
    }

    /// Reads, changes and writes the state under the directory's lock, so that two processes never
    /// take the same queued answer.
    @discardableResult
    private func modify(_ change: (inout State) throws -> Void) throws -> State {
        do {
            return try SecureFiles.withDirectoryLock(directory) {
                let before = try read()
                var state = before
                try change(&state)
                // Compared as values: the encoder's key order differs from one encoding to the next.
                if state != before { try SecureFiles.writeAtomically(try JSONEncoder().encode(state), to: path) }
                return state
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError.ioError("cannot write the biometry state: \(error)")
        }
    }
}
