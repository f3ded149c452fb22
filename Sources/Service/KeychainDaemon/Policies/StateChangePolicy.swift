import Foundation
import KeychainCore

/// Who may carry out which control (`KeychainAdminRequest`): the lock state and passcode, the
/// simulated sensor's answers and the app registry, which every client of a keychain depends on. In
/// user mode the daemon serves one user, who may; in system mode each uid reaches its own keychain
/// only, and root decides for all.
struct StateChangePolicy: Sendable {
    let mode: DaemonConfiguration.Mode
    let development: Bool

    /// What the daemon must do before it carries out a control the policy allows.
    enum Requirement: Equatable, Sendable {
        /// Nothing more.
        case none
        /// The passcode the request carries is checked like an unlock, under the same delays.
        case passcodeCheck
        /// A passcode this caller sets may only be a first one on an empty keychain.
        case firstPasscodeOnlyOnAnEmptyKeychain
    }

    /// Decides one control for one caller, given whether the caller's keychain has a passcode; a
    /// refusal is thrown.
    func requirement(for request: KeychainAdminRequest, by caller: any PeerIdentity, passcodeSet: Bool)
        throws(KeychainError) -> Requirement
    {
        switch request {
        case .lock, .unlock, .unlockForSession, .removePasscode, .setEraseAfterFailedAttempts, .listApps,
            .biometry(.status), .companion(.status), .restart:
            // Each acts on the caller's own keychain only: an unlock and the passcode changes need its
            // passcode (the keybag checks it), lock and restart only take keys out of memory until the
            // passcode is given again, and the rest only read; the registry needs no registration to be
            // listed.
            return .none
        case .setPasscode:
            return firstPasscodeOnlyOnAnEmptyKeychain(for: caller) ? .firstPasscodeOnlyOnAnEmptyKeychain : .none
        case .biometry, .companion:
            try checkSensorDriving(by: caller)
            return .none
        case .registerApp(let registration):
            return try registryChange(by: caller, passcodeSet: passcodeSet, passcodeGiven: registration.passcode != nil)
        case .removeApp(_, let passcode, _), .setSecretServicePolicy(_, let passcode):
            return try registryChange(by: caller, passcodeSet: passcodeSet, passcodeGiven: passcode != nil)
        case .createBackup(let file, _, let passcode), .restoreBackup(let file, _, let passcode):
            return try backup(file, by: caller, passcodeSet: passcodeSet, passcodeGiven: passcode != nil)
        case .sync(let verb, _, _, let passcode):
            // Where every synchronizable item goes, and every app's past versions: decided as a backup
            // is. Syncing with the account the keychain is in already, and reading its state, are the
            // user's own.
            guard KeychainAdminRequest.syncVerbsDecidedAsABackup.contains(verb) else { return .none }
            return try wholeKeychainChange(
                by: caller, passcodeSet: passcodeSet, passcodeGiven: passcode != nil,
                subject: "changing the sync account")
        case .importSecrets(_, _, let passcode):
            // It writes into many apps' groups, as a restore does.
            return try wholeKeychainChange(
                by: caller, passcodeSet: passcodeSet, passcodeGiven: passcode != nil, subject: "an import")
        case .eraseAllContentAndSettings(let passcode):
            // Everything goes, every app's items and the registry: decided as a backup is.
            return try wholeKeychainChange(
                by: caller, passcodeSet: passcodeSet, passcodeGiven: passcode != nil, subject: "erasing the keychain")
        case .migrateDeviceRoot(_, let passcode):
            // Every item is re-wrapped and the keybag replaced: decided as an erase is.
            return try wholeKeychainChange(
                by: caller, passcodeSet: passcodeSet, passcodeGiven: passcode != nil,
                subject: "moving the device root")
        }
    }

    /// What a backup or a restore needs. A backup holds the items of every access group, and a restore
    /// writes into every group: were either open to any process of the user, one could take every
    /// app's secrets under a backup password of its choosing, or plant items in another app's group.
    /// So the keychain's passcode is proved first (checked like an unlock, under the same delays). A
    /// keychain without a passcode has nothing to prove with; its files, and the device root beside
    /// them, are the user's to read anyway. A system daemon opens no file for its caller (it would open
    /// it as its own user): the caller passes the one it opened; and there, as for the registry, a user
    /// other than root proves a passcode the keychain must have, since its files are not the user's.
    private func backup(_ file: BackupFile, by caller: any PeerIdentity, passcodeSet: Bool, passcodeGiven: Bool)
        throws(KeychainError) -> Requirement
    {
        if mode == .system {
            if case .path = file {
                throw KeychainError.invalidParameter(
                    "a system daemon opens no file for its caller: pass the file you opened (the security command does)"
                )
            }
        }
        return try wholeKeychainChange(
            by: caller, passcodeSet: passcodeSet, passcodeGiven: passcodeGiven, subject: "a backup or a restore")
    }

    /// What a request that reads or changes every access group at once needs: the passcode where the
    /// keychain has one; in system mode, as for the registry, one the keychain must have (root aside).
    private func wholeKeychainChange(
        by caller: any PeerIdentity, passcodeSet: Bool, passcodeGiven: Bool, subject: String
    )
        throws(KeychainError) -> Requirement
    {
        if mode == .system {
            return try passcodeProof(
                by: caller, passcodeSet: passcodeSet, passcodeGiven: passcodeGiven, subject: subject)
        }
        guard passcodeSet else { return .none }
        guard passcodeGiven else {
            throw KeychainError.authenticationFailed("\(subject) needs the keychain's passcode")
        }
        return .passcodeCheck
    }

    /// The simulated sensor answers for the user: in system mode only root may drive it (or anyone, in
    /// development mode), or a process of the user could answer its own prompts.
    private func checkSensorDriving(by caller: any PeerIdentity) throws(KeychainError) {
        if mode == .system, caller.uid != 0, !development {
            throw KeychainError.missingEntitlement(
                "the simulated biometric sensor of a system daemon is driven by root or in development mode")
        }
    }

    /// What a registry change needs. In system mode root changes its own registry freely; any other
    /// user changes theirs only with the keychain's passcode (checked like an unlock, under the same
    /// delays), so that a process of theirs cannot register itself; a keychain without a passcode
    /// cannot have its registry changed by its user at all.
    private func registryChange(by caller: any PeerIdentity, passcodeSet: Bool, passcodeGiven: Bool)
        throws(KeychainError) -> Requirement
    {
        if mode == .user { return .none }
        return try passcodeProof(
            by: caller, passcodeSet: passcodeSet, passcodeGiven: passcodeGiven, subject: "changing the app registry")
    }

    /// In system mode: root freely; any other user with the passcode of a keychain that has one.
    private func passcodeProof(by caller: any PeerIdentity, passcodeSet: Bool, passcodeGiven: Bool, subject: String)
        throws(KeychainError) -> Requirement
    {
        if caller.uid == 0 { return .none }
        guard passcodeSet else {
            throw KeychainError.authenticationFailed(
                "in system mode \(subject) needs the keychain's passcode: set one first (security set-keychain-password), or ask root"
            )
        }
        guard passcodeGiven else {
            throw KeychainError.authenticationFailed("\(subject) needs the keychain's passcode")
        }
        return .passcodeCheck
    }

    /// Whether a passcode set by this caller may only be a first one on an empty keychain: in system
    /// mode for every user but root. Whatever the request says about a current passcode, the keybag
    /// decides from its own state; were a first passcode allowed on a keychain that holds items or
    /// apps, any process of the user could set one and then pass the registry's passcode check with it.
    private func firstPasscodeOnlyOnAnEmptyKeychain(for caller: any PeerIdentity) -> Bool {
        mode == .system && caller.uid != 0
    }
}
