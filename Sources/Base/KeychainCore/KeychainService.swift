import Foundation
import KeychainBytes

/// Everything the `Security` API and the `security` command ask of a keychain, as one request type:
/// plain values, so a request made in-process can equally be carried to the daemon.
public enum KeychainRequest: Sendable {
    /// `SecItemAdd`.
    case add(attributes: [String: ItemValue])
    /// `SecItemCopyMatching`.
    case copyMatching(query: [String: ItemValue])
    /// `SecItemUpdate`.
    case update(query: [String: ItemValue], attributes: [String: ItemValue])
    /// `SecItemDelete`.
    case delete(query: [String: ItemValue])
    /// The lock state, failed attempts and the next allowed attempt.
    case status
    case lock
    case unlock(passcode: SecureBytes)
    /// Unlocks and holds the unlock for the login session: embedded, later processes of the user start
    /// unlocked until it is locked or the machine restarts; a daemon's unlock holds for all its clients
    /// anyway, so there it is an unlock.
    case unlockForSession(passcode: SecureBytes)
    /// Sets a passcode (`current` nil) or changes it.
    case setPasscode(new: SecureBytes, current: SecureBytes?)
    case removePasscode(current: SecureBytes)
    case setEraseAfterFailedAttempts(enabled: Bool, passcode: SecureBytes?)
    /// Where the keychain's database is, for display (the `keychain:` line of the `security` command).
    case location
    /// The daemon's app registry (`security app`): the embedded keychain has none and answers
    /// `.notAvailable`.
    case registerApp(AppRegistrationRequest)
    case listApps
    case removeApp(executablePath: String, passcode: SecureBytes?)
    /// `LAContext`: evaluates (or preflights) a policy or an access control for the context named.
    case authenticate(AuthenticationRequest)
    /// `LAContext.invalidate()`: the context satisfies nothing from now on.
    case invalidateContext(AuthenticationContextReference)
    /// The simulated biometric sensor (`security biometry`).
    case biometry(BiometryCommand)
    /// The simulated companion device (`security companion`): enrolled means paired.
    case companion(BiometryCommand)
    /// `SecKeyCreateRandomKey` with `kSecAttrTokenIDSecureEnclave`: makes a P-256 key whose private
    /// half only the device root's holder can use, stores it with these attributes (a SecItemAdd
    /// dictionary without the key itself), and answers like an add asked for its attributes, data
    /// (the public key) and persistent reference; with `perm` false, stores nothing and answers its
    /// attributes, public key and token (`toid`).
    case generateEnclaveKey(attributes: [String: ItemValue])
    /// One private-key operation with the enclave key `query` names by persistent reference (or
    /// carries the token of, as `toid`); the query also carries what a read would (`kSecUseAuthenticationContext`, the prompt, the UI
    /// choice), for the key's access control. Answers `.secret`.
    case useEnclaveKey(query: [String: ItemValue], operation: EnclaveKeyOperation)

    /// The request's name, for logs and tests; never its values.
    public var name: String {
        switch self {
        case .add: "add"
        case .copyMatching: "copyMatching"
        case .update: "update"
        case .delete: "delete"
        case .status: "status"
        case .lock: "lock"
        case .unlock: "unlock"
        case .unlockForSession: "unlockForSession"
        case .setPasscode: "setPasscode"
        case .removePasscode: "removePasscode"
        case .setEraseAfterFailedAttempts: "setEraseAfterFailedAttempts"
        case .location: "location"
        case .registerApp: "registerApp"
        case .listApps: "listApps"
        case .removeApp: "removeApp"
        case .authenticate: "authenticate"
        case .invalidateContext: "invalidateContext"
        case .biometry: "biometry"
        case .companion: "companion"
        case .generateEnclaveKey: "generateEnclaveKey"
        case .useEnclaveKey: "useEnclaveKey"
        }
    }
}

/// What a request gives back.
public enum KeychainAnswer: Sendable, Equatable {
    case done
    case result(ItemResult?)
    case status(KeybagStatus)
    case location(String)
    /// The app registry, in the order the entries were made.
    case apps([AppRegistration])
    case authentication(AuthenticationOutcome)
    case biometry(BiometryStatus)
    /// Bytes as sensitive as a key (an enclave key's shared secret), or a signature.
    case secret(SecureBytes)
}

/// A keychain as its clients see it: the embedded engine in-process, or (later) the daemon over its
/// socket. The `Security` module and the `security` command reach a keychain only through this.
public protocol KeychainService: Sendable {
    /// Performs one request for the caller the service stands for; failures are `KeychainError`s.
    func perform(_ request: KeychainRequest) throws -> KeychainAnswer
}

extension KeychainService {
    public func add(_ attributes: [String: ItemValue]) throws -> ItemResult? {
        try result(of: .add(attributes: attributes))
    }

    public func copyMatching(_ query: [String: ItemValue]) throws -> ItemResult? {
        try result(of: .copyMatching(query: query))
    }

    public func update(_ query: [String: ItemValue], attributes: [String: ItemValue]) throws {
        _ = try perform(.update(query: query, attributes: attributes))
    }

    public func delete(_ query: [String: ItemValue]) throws { _ = try perform(.delete(query: query)) }

    public func status() throws -> KeybagStatus {
        guard case .status(let status) = try perform(.status) else { throw unexpected(.status) }
        return status
    }

    public func lock() throws { _ = try perform(.lock) }

    public func unlock(passcode: SecureBytes) throws { _ = try perform(.unlock(passcode: passcode)) }
    public func unlockForSession(passcode: SecureBytes) throws {
        _ = try perform(.unlockForSession(passcode: passcode))
    }

    public func setPasscode(_ new: SecureBytes, current: SecureBytes?) throws {
        _ = try perform(.setPasscode(new: new, current: current))
    }

    public func removePasscode(current: SecureBytes) throws { _ = try perform(.removePasscode(current: current)) }

    public func setEraseAfterFailedAttempts(_ enabled: Bool, passcode: SecureBytes?) throws {
        _ = try perform(.setEraseAfterFailedAttempts(enabled: enabled, passcode: passcode))
    }

    public func location() throws -> String {
        guard case .location(let path) = try perform(.location) else { throw unexpected(.location) }
        return path
    }

    public func registerApp(_ registration: AppRegistrationRequest) throws {
        _ = try perform(.registerApp(registration))
    }

    public func listApps() throws -> [AppRegistration] {
        guard case .apps(let apps) = try perform(.listApps) else { throw unexpected(.listApps) }
        return apps
    }

    public func removeApp(executablePath: String, passcode: SecureBytes?) throws {
        _ = try perform(.removeApp(executablePath: executablePath, passcode: passcode))
    }

    public func authenticate(_ request: AuthenticationRequest) throws -> AuthenticationOutcome {
        guard case .authentication(let outcome) = try perform(.authenticate(request)) else {
            throw unexpected(.authenticate(request))
        }
        return outcome
    }

    public func invalidate(_ context: AuthenticationContextReference) throws {
        _ = try perform(.invalidateContext(context))
    }

    public func biometry(_ command: BiometryCommand) throws -> BiometryStatus {
        guard case .biometry(let status) = try perform(.biometry(command)) else {
            throw unexpected(.biometry(command))
        }
        return status
    }

    public func companion(_ command: BiometryCommand) throws -> BiometryStatus {
        guard case .biometry(let status) = try perform(.companion(command)) else {
            throw unexpected(.companion(command))
        }
        return status
    }

    public func generateEnclaveKey(_ attributes: [String: ItemValue]) throws -> ItemResult? {
        try result(of: .generateEnclaveKey(attributes: attributes))
    }

    public func useEnclaveKey(_ query: [String: ItemValue], _ operation: EnclaveKeyOperation) throws -> SecureBytes {
        let request = KeychainRequest.useEnclaveKey(query: query, operation: operation)
        guard case .secret(let output) = try perform(request) else { throw unexpected(request) }
        return output
    }

    private func result(of request: KeychainRequest) throws -> ItemResult? {
        guard case .result(let result) = try perform(request) else { throw unexpected(request) }
        return result
    }

    private func unexpected(_ request: KeychainRequest) -> KeychainError {
        .internalError("the keychain service answered \(request.name) with something else")
    }
}
