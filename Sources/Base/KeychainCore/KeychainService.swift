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
    /// Locks the keychain: class A keys leave memory (for every client, through the daemon).
    case lock
    /// Unlocks with the passcode; the attempt is counted, under the escalating delays.
    case unlock(passcode: SecureBytes)
    /// Unlocks and holds the unlock for the login session: embedded, later processes of the user start
    /// unlocked until it is locked or the machine restarts; a daemon's unlock holds for all its clients
    /// anyway, so there it is an unlock.
    case unlockForSession(passcode: SecureBytes)
    /// Sets a passcode (`current` nil) or changes it.
    case setPasscode(new: SecureBytes, current: SecureBytes?)
    /// Removes the passcode: `WhenPasscodeSetThisDeviceOnly` items are destroyed, and items whose access
    /// control binds them to the passcode become unreadable for good.
    case removePasscode(current: SecureBytes)
    /// Turns on or off the erase at the tenth consecutive failed attempt; needs the passcode when one
    /// is set.
    case setEraseAfterFailedAttempts(enabled: Bool, passcode: SecureBytes?)
    /// Where the keychain's database is, for display (the `keychain:` line of the `security` command).
    case location
    /// The daemon's app registry (`security app`): the embedded keychain has none and answers
    /// `.notAvailable`.
    case registerApp(AppRegistrationRequest)
    /// The registry's entries (`security app list`); needs no registration.
    case listApps
    /// Removes the entry of an executable; a system daemon asks a user other than root for the
    /// keychain's passcode, as it does to register.
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
    /// The request was carried out and has nothing to tell (an update, a delete, a lock...).
    case done
    /// An add or a search: what the query asked to be returned, nil when it asked for nothing.
    case result(ItemResult?)
    /// The keybag's state (`.status`).
    case status(KeybagStatus)
    /// The database's path (`.location`).
    case location(String)
    /// The app registry, in the order the entries were made.
    case apps([AppRegistration])
    /// What an evaluation came to (`.authenticate`).
    case authentication(AuthenticationOutcome)
    /// The simulated sensor's or companion's state after the command.
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

// One method per request, each unpacking the answer it expects: callers then never match on
// `KeychainAnswer`, and an answer of another kind is an internal error, not a crash.
extension KeychainService {
    /// `.add`: what the attributes asked to be returned, if anything.
    public func add(_ attributes: [String: ItemValue]) throws -> ItemResult? {
        try result(of: .add(attributes: attributes))
    }

    /// `.copyMatching`: the items the query finds, in the shape it asked for.
    public func copyMatching(_ query: [String: ItemValue]) throws -> ItemResult? {
        try result(of: .copyMatching(query: query))
    }

    /// `.update`: changes every item the query finds.
    public func update(_ query: [String: ItemValue], attributes: [String: ItemValue]) throws {
        _ = try perform(.update(query: query, attributes: attributes))
    }

    /// `.delete`: deletes every item the query finds.
    public func delete(_ query: [String: ItemValue]) throws { _ = try perform(.delete(query: query)) }

    /// `.status`: the lock state, failed attempts and the next allowed attempt.
    public func status() throws -> KeybagStatus {
        guard case .status(let status) = try perform(.status) else { throw unexpected(.status) }
        return status
    }

    /// `.lock`.
    public func lock() throws { _ = try perform(.lock) }

    /// `.unlock`.
    public func unlock(passcode: SecureBytes) throws { _ = try perform(.unlock(passcode: passcode)) }
    /// `.unlockForSession`.
    public func unlockForSession(passcode: SecureBytes) throws {
        _ = try perform(.unlockForSession(passcode: passcode))
    }

    /// `.setPasscode`: sets one (`current` nil) or changes it.
    public func setPasscode(_ new: SecureBytes, current: SecureBytes?) throws {
        _ = try perform(.setPasscode(new: new, current: current))
    }

    /// `.removePasscode`.
    public func removePasscode(current: SecureBytes) throws { _ = try perform(.removePasscode(current: current)) }

    /// `.setEraseAfterFailedAttempts`.
    public func setEraseAfterFailedAttempts(_ enabled: Bool, passcode: SecureBytes?) throws {
        _ = try perform(.setEraseAfterFailedAttempts(enabled: enabled, passcode: passcode))
    }

    /// `.location`: the database's path, for display.
    public func location() throws -> String {
        guard case .location(let path) = try perform(.location) else { throw unexpected(.location) }
        return path
    }

    /// `.registerApp`: the daemon's registry only; the embedded keychain answers `.notAvailable`.
    public func registerApp(_ registration: AppRegistrationRequest) throws {
        _ = try perform(.registerApp(registration))
    }

    /// `.listApps`: the registry's entries, in the order they were made.
    public func listApps() throws -> [AppRegistration] {
        guard case .apps(let apps) = try perform(.listApps) else { throw unexpected(.listApps) }
        return apps
    }

    /// `.removeApp`.
    public func removeApp(executablePath: String, passcode: SecureBytes?) throws {
        _ = try perform(.removeApp(executablePath: executablePath, passcode: passcode))
    }

    /// `.authenticate`: a failed evaluation is an outcome with its failure, not a thrown error.
    public func authenticate(_ request: AuthenticationRequest) throws -> AuthenticationOutcome {
        guard case .authentication(let outcome) = try perform(.authenticate(request)) else {
            throw unexpected(.authenticate(request))
        }
        return outcome
    }

    /// `.invalidateContext`.
    public func invalidate(_ context: AuthenticationContextReference) throws {
        _ = try perform(.invalidateContext(context))
    }

    /// `.biometry`: drives the simulated sensor as `security biometry` does, and answers its state.
    public func biometry(_ command: BiometryCommand) throws -> BiometryStatus {
        guard case .biometry(let status) = try perform(.biometry(command)) else {
            throw unexpected(.biometry(command))
        }
        return status
    }

    /// `.companion`: drives the simulated companion device as `security companion` does; where none is
    /// simulated, an error.
    public func companion(_ command: BiometryCommand) throws -> BiometryStatus {
        guard case .biometry(let status) = try perform(.companion(command)) else {
            throw unexpected(.companion(command))
        }
        return status
    }

    /// `.generateEnclaveKey`.
    public func generateEnclaveKey(_ attributes: [String: ItemValue]) throws -> ItemResult? {
        try result(of: .generateEnclaveKey(attributes: attributes))
    }

    /// `.useEnclaveKey`: the operation's output (a signature or a shared secret), in wiped memory.
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
