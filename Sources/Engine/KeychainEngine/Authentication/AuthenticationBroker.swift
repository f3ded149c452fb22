import Dispatch
import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag
import Synchronization

/// Decides whether the user is present: evaluates access-control constraints and `LAContext` policies
/// against the authenticators (the simulated biometric sensor; the device passcode's prompt is still
/// to come), and remembers what each authentication context has evaluated, so that an evaluated
/// context satisfies later calls that name it without asking again.
///
/// Contexts are kept per client process (`ClientIdentity.contextScope`): a context identifier from
/// another process, or from before the service started, names nothing and satisfies nothing. The
/// client's word that it authenticated is never taken: a context counts as evaluated only when this
/// broker evaluated it.
final class AuthenticationBroker: Sendable {
    let biometry: any BiometricSensor
    /// A paired companion device (Apple's watch), simulated as the sensor is; nil when none is.
    let companion: (any BiometricSensor)?
    private let keybag: Keybag
    /// Where the device passcode is asked for; nil: nowhere (no program configured), so it cannot be.
    private let passcodePrompt: (any PasscodePrompt)?
    /// What each process's contexts evaluated, by process: one process cannot push out another's.
    private let scopes = Mutex<[String: Scope]>([:])

    /// Contexts remembered per process, and processes remembered; the least recently used go first.
    static let contextsPerScope = 64
    static let maximumScopes = 1_024

    private struct Scope {
        var contexts: [UUID: EvaluatedContext] = [:]
        var lastUse: UInt64 = 0
    }

    init(
        biometry: any BiometricSensor, companion: (any BiometricSensor)?, keybag: Keybag,
        passcodePrompt: (any PasscodePrompt)?
    ) {
        self.biometry = biometry
        self.companion = companion
        self.keybag = keybag
        self.passcodePrompt = passcodePrompt
    }

    private struct ContextKey: Hashable {
        var scope: String?
        var identifier: UUID
    }

    /// What one context has evaluated.
    private struct EvaluatedContext {
        /// The biometry domain state it matched, if it matched.
        var biometry: Data?
        /// The device passcode was entered in it.
        var passcode = false
        /// The companion device approved in it.
        var companion = false
        var invalidated = false
        var lastUse: UInt64 = 0
    }

    // MARK: LAContext

    func authenticate(_ request: AuthenticationRequest, client: ClientIdentity) throws -> AuthenticationOutcome {
        let enrollment = try biometry.enrollment()
        let biometryType = enrollment.enrolled ? biometry.biometryType : 0
        func outcome(_ failure: AuthenticationFailure?) -> AuthenticationOutcome {
            AuthenticationOutcome(failure: failure, domainState: enrollment.domainState, biometryType: biometryType)
        }
        let key = ContextKey(scope: client.contextScope, identifier: request.context.identifier)
        if context(key)?.invalidated == true { return outcome(.invalidContext) }
        let constraint: AccessConstraint?
        switch request.subject {
        case .policy(let policy): constraint = policy.constraint
        case .accessControl(let accessControl):
            if let problem = AccessControlPolicy.problem(withFlags: accessControl.flags) {
                throw KeychainError.invalidParameter("invalid access control: \(problem)")
            }
            constraint = accessControl.constraint
        }
        guard let constraint else { return outcome(nil) }
        if request.preflight {
            return outcome(
                availability(
                    of: constraint, enrolled: enrollment.enrolled, paired: try companion?.enrollment().enrolled ?? false
                )
            )
        }
        return outcome(
            try satisfy(
                constraint, key: key, reason: request.reason, interactionAllowed: !request.context.interactionNotAllowed
            ))
    }

    /// Forgets what `context` evaluated (a context of one call's own, once the call is done).
    func forget(_ context: AuthenticationContextReference, client: ClientIdentity) {
        forget(ContextKey(scope: client.contextScope, identifier: context.identifier))
    }

    func invalidate(_ context: AuthenticationContextReference, client: ClientIdentity) {
        let key = ContextKey(scope: client.contextScope, identifier: context.identifier)
        remember(key) { $0.invalidated = true }
    }

    // MARK: General-purpose tools

    /// When the user last approved a tool's requests, by approval key (the tool and the terminal session
    /// it ran in).
    private let toolApprovals = Mutex<[String: ContinuousClock.Instant]>([:])

    /// Asks the user whether a general-purpose tool may read or change secrets (biometry when a set is enrolled,
    /// else the device passcode: `userPresence`), unless they approved the same tool in the same terminal
    /// session within `reuse`. `approvalKey` nil (no terminal) is never reused. Throws the SecItem
    /// status when the user does not approve, or cannot be asked.
    func approveToolRequest(approvalKey: String?, reason: String, reuse: Duration, terminal: String? = nil) throws {
        if let approvalKey, reuse > .zero, let last = toolApprovals.withLock({ $0[approvalKey] }),
            ContinuousClock.now - last < reuse
        {
            return
        }
        let scratch = ContextKey(scope: "tool", identifier: UUID())
        defer { forget(scratch) }
        if let failure = try satisfy(
            .userPresence, key: scratch, reason: reason, interactionAllowed: true, terminal: terminal)
        {
            if failure == .passcodeNotSet {
                throw KeychainError.authenticationFailed(
                    "a general-purpose tool reads or changes secrets only after the user is asked, and this keychain has neither a passcode nor enrolled biometry to ask with"
                )
            }
            throw failure.keychainError
        }
        guard let approvalKey, reuse > .zero else { return }
        toolApprovals.withLock { approvals in
            if approvals.count >= Self.maximumScopes { approvals.removeAll() }
            approvals[approvalKey] = ContinuousClock.now
        }
    }

    /// Asks for the device passcode through the prompt and unlocks with it (counted as an unlock is):
    /// what an unlock asked for by another front end (the Secret Service's prompts) does.
    func unlockByAsking(reason: String, terminal: String? = nil) throws {
        let scratch = ContextKey(scope: "unlock", identifier: UUID())
        defer { forget(scratch) }
        if let failure = passcode(key: scratch, reason: reason, interactionAllowed: true, terminal: terminal) {
            throw failure.keychainError
        }
    }

    // MARK: Items

    /// Satisfies an item's constraint for a read or an update, asking the user where it must and may;
    /// throws the SecItem status when it is not satisfied.
    func authorize(
        _ accessControl: AccessControlPolicy, context: AuthenticationContextReference?, client: ClientIdentity,
        reason: String, interactionAllowed: Bool, boundSet: Data? = nil
    ) throws {
        let key = context.map { ContextKey(scope: client.contextScope, identifier: $0.identifier) }
        if let key, self.context(key)?.invalidated == true {
            throw AuthenticationFailure.invalidContext.keychainError
        }
        guard let constraint = accessControl.constraint else { return }
        let allowed = interactionAllowed && context?.interactionNotAllowed != true
        // With no context of the caller's, the item's prompt is evaluated in one of its own, kept nowhere.
        let scratch = key ?? ContextKey(scope: "item", identifier: UUID())
        let failure = try satisfy(
            constraint, key: scratch, reason: reason, interactionAllowed: allowed, boundSet: boundSet)
        // Invalidated while the user was asked: the answer counts for nothing.
        if let key, self.context(key)?.invalidated == true {
            throw AuthenticationFailure.invalidContext.keychainError
        }
        if key == nil { forget(scratch) }
        if let failure { throw failure.keychainError }
    }

    /// The factors an existing item's secret opens with: the enrolled set's secret if it is bound to
    /// it (none enrolled: `.itemNotFound`, the binding is gone), and the application password from the
    /// context.
    func factors(
        for accessControl: AccessControlPolicy, context: AuthenticationContextReference?,
        interactionAllowed: Bool
    ) throws -> SecretFactors {
        var factors = SecretFactors()
        if accessControl.constraint?.bindsBiometryEnrollment == true {
            guard let secret = try biometry.enrollmentSecret() else {
                throw KeychainError.itemNotFound
            }
            factors.enrollment = secret
        }
        if accessControl.constraint?.bindsDevicePasscode == true {
            factors.passcodeClass = try passcodeClassKey(missing: KeychainError.itemNotFound)
        }
        if accessControl.requiresApplicationPassword {
            guard let password = context?.applicationPassword else {
                // No prompt for an application password exists here: asking would be the app's.
                throw interactionAllowed && context?.interactionNotAllowed != true
                    ? KeychainError.authenticationFailed(
                        "the item needs its application password (LAContext.setCredential), and none was given")
                    : AuthenticationFailure.notInteractive.keychainError
            }
            factors.applicationPassword = password
        }
        return factors
    }

    /// The factors a new item's secret is sealed under; nil when its access control (if any) guards no
    /// secret. Adding asks nobody (as on iOS, where an item is created under its access control without
    /// a prompt), but a binding to biometry needs an enrolled set, and an application password must be
    /// given.
    func factorsForNewItem(_ accessControl: AccessControlPolicy?, context: AuthenticationContextReference?) throws
        -> SecretFactors?
    {
        guard let accessControl, accessControl.guardsSecret else { return nil }
        var factors = SecretFactors()
        if accessControl.constraint?.bindsBiometryEnrollment == true {
            guard let secret = try biometry.enrollmentSecret() else {
                throw KeychainError.authenticationFailed(
                    "the item is bound to the enrolled biometry, and none is enrolled (security biometry enroll)")
            }
            factors.enrollment = secret
        }
        if accessControl.constraint?.bindsDevicePasscode == true {
            factors.passcodeClass = try passcodeClassKey(
                missing: KeychainError.authenticationFailed(
                    "the item is bound to the device passcode, and none is set (security set-keychain-password)"))
        }
        if accessControl.requiresApplicationPassword {
            guard let password = context?.applicationPassword else {
                throw KeychainError.authenticationFailed(
                    "an application-password item needs the password (LAContext.setCredential) when it is added")
            }
            factors.applicationPassword = password
        }
        return factors
    }

    /// What an item whose access control offers the current set as one alternative records at sealing:
    /// the set's domain state, or zeros when none is enrolled (no later set then matches).
    func currentSetBinding() throws -> Data {
        try biometry.enrollment().domainState ?? Data(count: 32)
    }

    /// Whether items of `protection` can be read now (the keychain did not lock meanwhile).
    func isAvailable(_ protection: ProtectionClass) -> Bool { (try? keybag.classKey(for: protection)) != nil }

    /// The passcode class's key: `missing` when no passcode is set (the key does not exist), locked
    /// when the keychain is.
    private func passcodeClassKey(missing: KeychainError) throws -> SecureBytes {
        do {
            return try keybag.classKey(for: .whenPasscodeSetThisDeviceOnly)
        } catch KeybagError.classUnavailable {
            throw missing
        } catch {
            throw KeychainError.interactionNotAllowed("the keychain is locked")
        }
    }

    // MARK: Evaluation

    /// Whether a passcode is set (what `canEvaluatePolicy` tells; that a prompt program exists it does not).
    private var passcodeAvailability: AuthenticationFailure? {
        keybag.status.lockState == .noPasscode ? .passcodeNotSet : nil
    }

    private func availability(of constraint: AccessConstraint, enrolled: Bool, paired: Bool) -> AuthenticationFailure? {
        switch constraint {
        case .biometryAny, .biometryCurrentSet: enrolled ? nil : .biometryNotEnrolled
        case .userPresence: enrolled ? nil : passcodeAvailability
        case .devicePasscode: passcodeAvailability
        case .companion: paired ? nil : .companionNotAvailable
        case .all(let parts):
            parts.lazy.compactMap { self.availability(of: $0, enrolled: enrolled, paired: paired) }.first
        case .any(let parts):
            parts.contains { availability(of: $0, enrolled: enrolled, paired: paired) == nil }
                ? nil : parts.lazy.compactMap { self.availability(of: $0, enrolled: enrolled, paired: paired) }.first
        }
    }

    /// Why the device passcode cannot be asked for now, or nil when it can: no passcode set, asking not
    /// allowed, or no prompt program configured.
    private func passcodeFailure(interactionAllowed: Bool) -> AuthenticationFailure? {
        if keybag.status.lockState == .noPasscode { return .passcodeNotSet }
        if !interactionAllowed { return .notInteractive }
        guard passcodePrompt != nil else {
            KeychainLog.error(
                "the device passcode was needed but cannot be asked: no prompt program (securityd --pinentry PROGRAM; embedded, KEYCHAIN_PINENTRY)"
            )
            return .authenticationFailed
        }
        return nil
    }

    /// The device passcode, asked for through the prompt and checked as an unlock is (counted, under
    /// the same delays; a right one also unlocks).
    private func passcode(key: ContextKey, reason: String, interactionAllowed: Bool, terminal: String? = nil)
        -> AuthenticationFailure?
    {
        if context(key)?.passcode == true {
            remember(key) { _ in }
            return nil
        }
        if let failure = passcodeFailure(interactionAllowed: interactionAllowed) { return failure }
        guard let passcodePrompt else { return .authenticationFailed }
        // While the delay after failed attempts runs, no passcode is taken (as an unlock): nobody is
        // asked for one that would be thrown away.
        if keybag.status.nextAttemptAllowed != nil { return .notInteractive }
        switch oneAtATime({ passcodePrompt.askPasscode(reason: reason, terminal: terminal) }) ?? .failure(.systemCancel)
        {
        case .success(let entered):
            do {
                try keybag.unlock(passcode: entered)
            } catch {
                return .authenticationFailed
            }
            remember(key) { $0.passcode = true }
            return nil
        case .failure(let failure):
            return failure
        }
    }

    /// Nil when `constraint` is satisfied (asking the user where it must and may), else why not.
    private func satisfy(
        _ constraint: AccessConstraint, key: ContextKey, reason: String, interactionAllowed: Bool,
        boundSet: Data? = nil,
        terminal: String? = nil
    ) throws -> AuthenticationFailure? {
        switch constraint {
        case .biometryAny, .biometryCurrentSet:
            return try biometric(
                key: key, currentSet: constraint == .biometryCurrentSet, reason: reason,
                interactionAllowed: interactionAllowed, boundSet: constraint == .biometryCurrentSet ? boundSet : nil)
        case .userPresence:
            // Biometry when a set is enrolled, the passcode otherwise (as iOS falls back).
            guard try biometry.enrollment().enrolled else {
                return passcode(key: key, reason: reason, interactionAllowed: interactionAllowed, terminal: terminal)
            }
            if context(key)?.passcode == true { return nil }
            return try biometric(key: key, currentSet: false, reason: reason, interactionAllowed: interactionAllowed)
        case .devicePasscode:
            return passcode(key: key, reason: reason, interactionAllowed: interactionAllowed)
        case .companion:
            return try companionApproval(key: key, reason: reason, interactionAllowed: interactionAllowed)
        case .all(let parts):
            for part in parts {
                if let failure = try satisfy(
                    part, key: key, reason: reason, interactionAllowed: interactionAllowed, boundSet: boundSet)
                {
                    return failure
                }
            }
            return nil
        case .any(let parts):
            var last: AuthenticationFailure = .authenticationFailed
            for part in parts {
                guard
                    let failure = try satisfy(
                        part, key: key, reason: reason, interactionAllowed: interactionAllowed, boundSet: boundSet)
                else { return nil }
                // The user canceling ends the evaluation; an unavailable factor lets the next be tried.
                if failure == .userCancel || failure == .notInteractive { return failure }
                last = failure
            }
            return last
        }
    }

    private func companionApproval(key: ContextKey, reason: String, interactionAllowed: Bool) throws
        -> AuthenticationFailure?
    {
        guard let companion, try companion.enrollment().enrolled else { return .companionNotAvailable }
        if context(key)?.companion == true {
            remember(key) { _ in }
            return nil
        }
        guard interactionAllowed else { return .notInteractive }
        switch try oneAtATime({ try companion.prompt(reason: reason) }) ?? .failure(.systemCancel) {
        case .success:
            remember(key) { $0.companion = true }
            return nil
        case .failure(let failure):
            return failure == .biometryNotEnrolled ? .companionNotAvailable : failure
        }
    }

    private func biometric(
        key: ContextKey, currentSet: Bool, reason: String, interactionAllowed: Bool, boundSet: Data? = nil
    ) throws -> AuthenticationFailure? {
        let enrollment = try biometry.enrollment()
        guard enrollment.enrolled, let domainState = enrollment.domainState else { return .biometryNotEnrolled }
        // An item made under another set: this alternative is gone (another one may still do).
        if let boundSet, boundSet != domainState { return .biometryNotEnrolled }
        // Evaluated before in this context: any match counts for biometryAny; for the current set it
        // must have been this enrollment.
        if let matched = context(key)?.biometry, !currentSet || matched == domainState {
            remember(key) { _ in }
            return nil
        }
        guard interactionAllowed else { return .notInteractive }
        switch try oneAtATime({ try biometry.prompt(reason: reason) }) ?? .failure(.systemCancel) {
        case .success:
            remember(key) { $0.biometry = domainState }
            return nil
        case .failure(let failure):
            return failure
        }
    }

    /// One prompt at a time per keychain, as a device shows one: another waits its turn for as long as a
    /// prompt may take (then it is a system cancel, nil), so that prompts cannot pile up.
    private let promptTurn = DispatchSemaphore(value: 1)

    private func oneAtATime<T>(_ prompt: () throws -> Result<T, AuthenticationFailure>) rethrows
        -> Result<T, AuthenticationFailure>?
    {
        guard promptTurn.wait(timeout: .now() + 150) == .success else { return nil }
        defer { promptTurn.signal() }
        return try prompt()
    }

    private func context(_ key: ContextKey) -> EvaluatedContext? {
        scopes.withLock { $0[key.scope ?? ""]?.contexts[key.identifier] }
    }

    private func forget(_ key: ContextKey) {
        scopes.withLock { scopes in
            scopes[key.scope ?? ""]?.contexts[key.identifier] = nil
            if scopes[key.scope ?? ""]?.contexts.isEmpty == true { scopes[key.scope ?? ""] = nil }
        }
    }

    private func remember(_ key: ContextKey, _ change: (inout EvaluatedContext) -> Void) {
        let now = DispatchTime.now().uptimeNanoseconds
        scopes.withLock { scopes in
            let name = key.scope ?? ""
            var scope = scopes[name] ?? Scope()
            var context = scope.contexts[key.identifier] ?? EvaluatedContext()
            change(&context)
            context.lastUse = now
            scope.contexts[key.identifier] = context
            scope.lastUse = now
            if scope.contexts.count > Self.contextsPerScope,
                let oldest = scope.contexts.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
            {
                scope.contexts[oldest] = nil
            }
            scopes[name] = scope
            if scopes.count > Self.maximumScopes,
                let oldest = scopes.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
            {
                scopes[oldest] = nil
            }
        }
    }
}
