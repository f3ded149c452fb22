import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
@_exported import Security
import Synchronization

/// An authentication context: evaluates policies and access controls with the keychain service's
/// authenticators (the daemon's when one runs, else this process's embedded keychain), and, named in
/// a query as `kSecUseAuthenticationContext`, lets an evaluation satisfy later keychain calls without
/// asking again.
///
/// The service keeps what a context has evaluated; the context itself only names it, so a client
/// cannot claim it authenticated. Its properties may be set and read from any thread.
open class LAContext: NSObject, SecAuthenticationContextObject, @unchecked Sendable {
    // Everything mutable is in `state`, behind its lock; the identifier never changes.
    private struct State {
        var localizedReason = ""
        var localizedFallbackTitle: String?
        var localizedCancelTitle: String?
        var interactionNotAllowed = false
        var reuseDuration: TimeInterval = 0
        var biometryType: LABiometryType = .none
        var domainState: Data?
        var applicationPassword: SecureBytes?
        var invalidated = false
    }

    private let state = Mutex(State())
    /// Names this context to the keychain service.
    public let contextIdentifier = UUID()

    public override init() { super.init() }

    // MARK: Properties

    open var localizedReason: String {
        get { state.withLock { $0.localizedReason } }
        set { state.withLock { $0.localizedReason = newValue } }
    }

    open var localizedFallbackTitle: String? {
        get { state.withLock { $0.localizedFallbackTitle } }
        set { state.withLock { $0.localizedFallbackTitle = newValue } }
    }

    open var localizedCancelTitle: String? {
        get { state.withLock { $0.localizedCancelTitle } }
        set { state.withLock { $0.localizedCancelTitle = newValue } }
    }

    /// When true, nothing this context evaluates asks the user: what would need to fails instead.
    open var interactionNotAllowed: Bool {
        get { state.withLock { $0.interactionNotAllowed } }
        set { state.withLock { $0.interactionNotAllowed = newValue } }
    }

    /// Kept, clamped to `LATouchIDAuthenticationMaximumAllowableReuseDuration` as Apple clamps it. A
    /// device unlock with biometry has no counterpart here, so it grants nothing (docs/access-control.md).
    open var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { state.withLock { $0.reuseDuration } }
        set {
            state.withLock {
                $0.reuseDuration = min(max(newValue, 0), LATouchIDAuthenticationMaximumAllowableReuseDuration)
            }
        }
    }

    /// The biometry available, as learnt by the last `canEvaluatePolicy` or evaluation.
    open var biometryType: LABiometryType { state.withLock { $0.biometryType } }

    /// A digest of the enrolled biometry after an evaluation: it changes when the enrolled set does.
    open var evaluatedPolicyDomainState: Data? { state.withLock { $0.domainState } }

    /// What the keychain service is told about this context.
    public var authenticationContextReference: AuthenticationContextReference {
        state.withLock {
            AuthenticationContextReference(
                identifier: contextIdentifier, interactionNotAllowed: $0.interactionNotAllowed,
                applicationPassword: $0.applicationPassword,
                localizedReason: $0.localizedReason.isEmpty ? nil : $0.localizedReason)
        }
    }

    // MARK: Policies

    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        let failure = run(.policy(Self.policy(policy)), preflight: true, reason: "")
        error?.pointee = failure.map { NSError(domain: LAError.errorDomain, code: $0.rawValue) }
        return failure == nil
    }

    open func evaluatePolicy(
        _ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        guard !localizedReason.isEmpty else {
            // Apple raises an exception for an empty reason; here the reply says the call was wrong.
            reply(false, LAError(.invalidContext, userInfo: [NSLocalizedDescriptionKey: "an empty localizedReason"]))
            return
        }
        DispatchQueue.global().async { [self] in
            let failure = run(.policy(Self.policy(policy)), preflight: false, reason: localizedReason)
            reply(failure == nil, failure.map(LAError.init(failure:)))
        }
    }

    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            evaluatePolicy(policy, localizedReason: localizedReason) { success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Evaluates `accessControl` for `operation`: creating an item or a key asks nothing (its
    /// constraints guard use); using one asks for what its constraints require. Success lets keychain
    /// calls that name this context use such items without asking again.
    open func evaluateAccessControl(
        _ accessControl: SecAccessControl, operation: LAAccessControlOperation, localizedReason: String,
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        let policy = accessControl.policy
        DispatchQueue.global().async { [self] in
            switch operation {
            case .createItem, .createKey:
                let failure = run(.accessControl(policy), preflight: true, reason: localizedReason)
                reply(failure == nil || failure == .biometryNotEnrolled ? true : false, nil)
            case .useItem, .useKeySign, .useKeyDecrypt, .useKeyKeyExchange:
                let failure = run(.accessControl(policy), preflight: false, reason: localizedReason)
                reply(failure == nil, failure.map(LAError.init(failure:)))
            }
        }
    }

    open func evaluateAccessControl(
        _ accessControl: SecAccessControl, operation: LAAccessControlOperation, localizedReason: String
    ) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            evaluateAccessControl(accessControl, operation: operation, localizedReason: localizedReason) {
                success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Ends the context: evaluations already made no longer count, and new ones fail with
    /// `LAError.invalidContext`.
    open func invalidate() {
        let reference = authenticationContextReference
        let wasValid = state.withLock { state in
            defer { state.invalidated = true }
            return !state.invalidated
        }
        guard wasValid else { return }
        _ = try? KeychainServices.current().invalidate(reference)
    }

    // MARK: Credentials

    /// Sets (or, with nil, removes) the application password items with `.applicationPassword` are
    /// sealed under. Other credential types are not supported here (false).
    open func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        guard type == .applicationPassword else { return false }
        let secret = credential.map { SecureBytes(copying: $0) }
        state.withLock { $0.applicationPassword = secret }
        return true
    }

    open func isCredentialSet(_ type: LACredentialType) -> Bool {
        type == .applicationPassword && state.withLock { $0.applicationPassword != nil }
    }

    // MARK: The service

    private static func policy(_ policy: LAPolicy) -> AuthenticationPolicy {
        AuthenticationPolicy(rawValue: policy.rawValue) ?? .biometrics
    }

    /// Asks the keychain service; nil on success, else why not (what was learnt about the device is kept).
    private func run(_ subject: AuthenticationRequest.Subject, preflight: Bool, reason: String)
        -> AuthenticationFailure?
    {
        if state.withLock({ $0.invalidated }) { return .invalidContext }
        let request = AuthenticationRequest(
            context: authenticationContextReference, subject: subject, preflight: preflight, reason: reason)
        do {
            let outcome = try KeychainServices.current().authenticate(request)
            state.withLock {
                $0.biometryType = LABiometryType(rawValue: outcome.biometryType) ?? .none
                if !preflight, outcome.failure == nil { $0.domainState = outcome.domainState }
            }
            return outcome.failure
        } catch let error as KeychainError where error.code == .invalidParameter {
            return .invalidContext
        } catch {
            // No keychain service to ask (a daemon that is gone, a keychain that cannot open).
            return .systemCancel
        }
    }
}
