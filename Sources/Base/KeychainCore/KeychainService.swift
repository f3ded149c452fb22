import FoundationEssentials
import KeychainBytes

/// What an app asks of its keychain: its items and keys, the lock state it sees, and the evaluations
/// of `LAContext`. Plain values, so a request made in-process can equally be carried to the daemon.
/// The controls of the keychain and the simulated device are `KeychainAdminRequest`s instead.
public enum KeychainRequest: Sendable {
    /// `SecItemAdd`.
    case add(attributes: [String: ItemValue])
    /// `SecItemCopyMatching`.
    case copyMatching(query: [String: ItemValue])
    /// `SecItemUpdate`.
    case update(query: [String: ItemValue], attributes: [String: ItemValue])
    /// `SecItemDelete`.
    case delete(query: [String: ItemValue])
    /// `SecItemAdd` of a `SecIdentity`: its certificate's item and its private key's (nil when the key
    /// is stored already, as a stored enclave key is), added together or not at all. Identities are
    /// found and deleted with `kSecClassIdentity` queries (`copyMatching`, `delete`); a search answers
    /// each identity as `.array([certificate, key])`.
    case addIdentity(certificate: [String: ItemValue], key: [String: ItemValue]?)
    /// The lock state, failed attempts and the next allowed attempt.
    case status
    /// Where the keychain's database is, for display (the `keychain:` line of the `security` command).
    case location
    /// `LAContext`: evaluates (or preflights) a policy or an access control for the context named.
    case authenticate(AuthenticationRequest)
    /// `LAContext.invalidate()`: the context satisfies nothing from now on.
    case invalidateContext(AuthenticationContextReference)
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
        case .addIdentity: "addIdentity"
        case .status: "status"
        case .location: "location"
        case .authenticate: "authenticate"
        case .invalidateContext: "invalidateContext"
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
    /// What a backup just written holds (`.createBackup`).
    case backup(BackupSummary)
    /// What a restore did (`.restoreBackup`).
    case restore(RestoreReport)
    /// What an import stored and left out (`.importSecrets`).
    case imported(ImportReport)
    /// What a sync command came to, as a JSON object (`.sync`).
    case syncResult(Data)
}

/// A keychain as its clients see it: the embedded engine in-process, or (later) the daemon over its
/// socket. The `Security` module and the `security` command reach a keychain only through this.
public protocol KeychainService: Sendable {
    /// Performs one request for the caller the service stands for; failures are `KeychainError`s.
    func perform(_ request: KeychainRequest) throws -> KeychainAnswer

    /// Carries out one control of the keychain or the simulated device; failures are `KeychainError`s.
    /// A daemon decides these by who asks (`security` run by the user, root), not by app registration.
    func administer(_ request: KeychainAdminRequest) throws -> KeychainAnswer

    /// The same, telling `progress` how far a long control has come (a backup or a restore: items done
    /// of all) while it runs, on the calling thread. A service that cannot tell runs it without.
    func administer(_ request: KeychainAdminRequest, progress: @escaping (_ done: Int, _ total: Int) -> Void)
        throws -> KeychainAnswer
}

extension KeychainService {
    /// A service that cannot tell how far a control has come runs it without telling.
    public func administer(
        _ request: KeychainAdminRequest, progress: @escaping (_ done: Int, _ total: Int) -> Void
    ) throws -> KeychainAnswer {
        try administer(request)
    }
}

// One method per request, each unpacking the answer it expects: callers then never match on
// `KeychainAnswer`, and an answer of another kind is an internal error, not a crash. The controls among
// them go through `administer`.
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

    /// `.addIdentity`: a certificate and its private key, added in one transaction.
    public func addIdentity(certificate: [String: ItemValue], key: [String: ItemValue]?) throws {
        _ = try perform(.addIdentity(certificate: certificate, key: key))
    }

    /// `.delete`: deletes every item the query finds.
    public func delete(_ query: [String: ItemValue]) throws { _ = try perform(.delete(query: query)) }

    /// `.status`: the lock state, failed attempts and the next allowed attempt.
    public func status() throws -> KeybagStatus {
        guard case .status(let status) = try perform(.status) else { throw unexpected(KeychainRequest.status.name) }
        return status
    }

    /// `.lock`.
    public func lock() throws { _ = try administer(.lock) }

    /// `.unlock`.
    public func unlock(passcode: SecureBytes) throws { _ = try administer(.unlock(passcode: passcode)) }
    /// `.unlockForSession`.
    public func unlockForSession(passcode: SecureBytes) throws {
        _ = try administer(.unlockForSession(passcode: passcode))
    }

    /// `.setPasscode`: sets one (`current` nil) or changes it.
    public func setPasscode(_ new: SecureBytes, current: SecureBytes?) throws {
        _ = try administer(.setPasscode(new: new, current: current))
    }

    /// `.removePasscode`.
    public func removePasscode(current: SecureBytes) throws { _ = try administer(.removePasscode(current: current)) }

    /// `.setEraseAfterFailedAttempts`.
    public func setEraseAfterFailedAttempts(_ enabled: Bool, passcode: SecureBytes?) throws {
        _ = try administer(.setEraseAfterFailedAttempts(enabled: enabled, passcode: passcode))
    }

    /// `.location`: the database's path, for display.
    public func location() throws -> String {
        guard case .location(let path) = try perform(.location) else { throw unexpected(KeychainRequest.location.name) }
        return path
    }

    /// `.registerApp`: the daemon's registry only; the embedded keychain answers `.notAvailable`.
    public func registerApp(_ registration: AppRegistrationRequest) throws {
        _ = try administer(.registerApp(registration))
    }

    /// `.setSecretServicePolicy`: the daemon's only; the embedded keychain answers `.notAvailable`.
    public func setSecretServicePolicy(_ policy: SecretServicePolicy, passcode: SecureBytes? = nil) throws {
        _ = try administer(.setSecretServicePolicy(policy, passcode: passcode))
    }

    /// `.importSecrets`: secrets from another store into the daemon's Secret Service items.
    public func importSecrets(_ secrets: [ImportedSecret], source: String, passcode: SecureBytes? = nil) throws
        -> ImportReport
    {
        guard
            case .imported(let report) = try administer(
                .importSecrets(source: source, secrets: secrets, passcode: passcode))
        else { throw unexpected("importSecrets") }
        return report
    }

    /// `.listApps`: the registry's entries, in the order they were made.
    public func listApps() throws -> [AppRegistration] {
        guard case .apps(let apps) = try administer(.listApps) else {
            throw unexpected(KeychainAdminRequest.listApps.name)
        }
        return apps
    }

    /// `.removeApp`.
    public func removeApp(executablePath: String, passcode: SecureBytes?, deletingItems: Bool = false) throws {
        _ = try administer(.removeApp(executablePath: executablePath, passcode: passcode, deletingItems: deletingItems))
    }

    /// `.authenticate`: a failed evaluation is an outcome with its failure, not a thrown error.
    public func authenticate(_ request: AuthenticationRequest) throws -> AuthenticationOutcome {
        guard case .authentication(let outcome) = try perform(.authenticate(request)) else {
            throw unexpected(KeychainRequest.authenticate(request).name)
        }
        return outcome
    }

    /// `.invalidateContext`.
    public func invalidate(_ context: AuthenticationContextReference) throws {
        _ = try perform(.invalidateContext(context))
    }

    /// `.biometry`: drives the simulated sensor as `security biometry` does, and answers its state.
    public func biometry(_ command: BiometryCommand) throws -> BiometryStatus {
        guard case .biometry(let status) = try administer(.biometry(command)) else {
            throw unexpected(KeychainAdminRequest.biometry(command).name)
        }
        return status
    }

    /// `.companion`: drives the simulated companion device as `security companion` does; where none is
    /// simulated, an error.
    public func companion(_ command: BiometryCommand) throws -> BiometryStatus {
        guard case .biometry(let status) = try administer(.companion(command)) else {
            throw unexpected(KeychainAdminRequest.companion(command).name)
        }
        return status
    }

    /// `.restart`: back to before the first unlock.
    public func restart() throws { _ = try administer(.restart) }

    /// `.migrateDeviceRoot`: the keychain under a root of another kind, every item kept.
    public func migrateDeviceRoot(to kind: DeviceRootKind, passcode: SecureBytes?) throws {
        _ = try administer(.migrateDeviceRoot(to: kind, passcode: passcode))
    }

    /// `.eraseAllContentAndSettings`: every item, the keybag and the device root.
    public func eraseAllContentAndSettings(passcode: SecureBytes?) throws {
        _ = try administer(.eraseAllContentAndSettings(passcode: passcode))
    }

    /// `.createBackup`: what the backup holds; `progress`, when given, is told the items done of all.
    public func createBackup(
        to file: BackupFile, password: SecureBytes?, passcode: SecureBytes?,
        progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> BackupSummary {
        let request = KeychainAdminRequest.createBackup(file: file, password: password, passcode: passcode)
        guard case .backup(let summary) = try administer(request, reporting: progress) else {
            throw unexpected(request.name)
        }
        return summary
    }

    /// `.restoreBackup`: what the restore did; `progress`, when given, is told the items done of all.
    public func restoreBackup(
        from file: BackupFile, password: SecureBytes?, passcode: SecureBytes?,
        progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws -> RestoreReport {
        let request = KeychainAdminRequest.restoreBackup(file: file, password: password, passcode: passcode)
        guard case .restore(let report) = try administer(request, reporting: progress) else {
            throw unexpected(request.name)
        }
        return report
    }

    private func administer(_ request: KeychainAdminRequest, reporting progress: ((Int, Int) -> Void)?) throws
        -> KeychainAnswer
    {
        guard let progress else { return try administer(request) }
        return try administer(request, progress: progress)
    }

    /// `.generateEnclaveKey`.
    public func generateEnclaveKey(_ attributes: [String: ItemValue]) throws -> ItemResult? {
        try result(of: .generateEnclaveKey(attributes: attributes))
    }

    /// `.useEnclaveKey`: the operation's output (a signature or a shared secret), in wiped memory.
    public func useEnclaveKey(_ query: [String: ItemValue], _ operation: EnclaveKeyOperation) throws -> SecureBytes {
        let request = KeychainRequest.useEnclaveKey(query: query, operation: operation)
        guard case .secret(let output) = try perform(request) else { throw unexpected(request.name) }
        return output
    }

    private func result(of request: KeychainRequest) throws -> ItemResult? {
        guard case .result(let result) = try perform(request) else { throw unexpected(request.name) }
        return result
    }

    private func unexpected(_ requestName: String) -> KeychainError {
        .internalError("the keychain service answered \(requestName) with something else")
    }
}
