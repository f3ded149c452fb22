import KeychainBytes

/// The controls of a keychain and of its simulated device, apart from what apps ask
/// (`KeychainRequest`): locking and unlocking, the passcode and the erase after failed attempts, the
/// daemon's app registry, the simulated biometric sensor and companion. The `security` command and
/// tests send them; an app's SecItem calls never do. Through the daemon they travel as frames of their
/// own, and the daemon's state-change policy decides each by who asks.
public enum KeychainAdminRequest: Sendable {
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
    /// The daemon's app registry (`security app`): the embedded keychain has none and answers
    /// `.notAvailable`.
    case registerApp(AppRegistrationRequest)
    /// The registry's entries (`security app list`); needs no registration.
    case listApps
    /// Removes the entry of an executable; a system daemon asks a user other than root for the
    /// keychain's passcode, as it does to register.
    /// With `deletingItems`, the items of every access group no other registered app keeps go with it
    /// (the iOS 10.3 beta's rule; never the default: iOS keeps an uninstalled app's items).
    case removeApp(executablePath: String, passcode: SecureBytes?, deletingItems: Bool = false)
    /// Sets what the Secret Service does for programs that are not registered apps (`security app
    /// policy secret-service`); decided as a registry change is (a system daemon would ask for the
    /// passcode, a user's own asks for nothing more than a registration does).
    case setSecretServicePolicy(SecretServicePolicy, passcode: SecureBytes?)
    /// Stores secrets read from another store (`security import gnome-keyring|kwallet`) as Secret
    /// Service items, each in the group of a registered app its source named, else in the shared group;
    /// decided as a restore is (it writes into many groups). Answers `.imported`. The daemon's only.
    case importSecrets(source: String, secrets: [ImportedSecret], passcode: SecureBytes?)
    /// A sync command for the daemon's keychain (`security sync …` through securityd): its verb, its
    /// arguments, and the account's recovery secret for `enroll` (for `recover`, the secret and the new
    /// one, each with a 32-bit length prefix). Enrolling, recovering, approving, removing and leaving
    /// change where every synchronizable item goes, so they are decided as a backup is (the keychain's
    /// `passcode` when it has one). Answers `.syncResult`. The daemon's only.
    case sync(verb: String, arguments: [String], secret: SecureBytes?, passcode: SecureBytes?)

    /// The `sync` verbs decided as a backup is: those that decide where every synchronizable item goes
    /// (the account, its devices, the guesses its recovery secret may still take), and `history`, which
    /// reads any synchronizable item's past versions, whatever app's it is. The others are the user's own.
    public static let syncVerbsDecidedAsABackup: Set<String> = [
        "enroll", "recover", "approve", "remove", "leave", "history", "reset-guesses",
    ]
    /// The simulated biometric sensor (`security biometry`).
    case biometry(BiometryCommand)
    /// The simulated companion device (`security companion`): enrolled means paired.
    case companion(BiometryCommand)
    /// "Restarts the device" (`security device reboot`): back to before the first unlock, every class
    /// key but class D's forgotten, and an unlock held for the session dropped.
    case restart
    /// "Erase All Content and Settings" (`security device erase`): every item, the keybag and the device
    /// root go, and the next use makes a new keychain under a new root. `passcode` is the keychain's,
    /// needed when it has one, as an iPhone asks for it.
    case eraseAllContentAndSettings(passcode: SecureBytes?)
    /// Writes a backup of the keychain to `file` (`security backup create`): with a
    /// `password`, one that restores onto another keychain (its `ThisDeviceOnly` classes only onto
    /// this one); without, one that restores only here. `passcode` is the keychain's, checked like an
    /// unlock first; a daemon needs it whenever the keychain has one. Answers `.backup`.
    case createBackup(file: BackupFile, password: SecureBytes?, passcode: SecureBytes?)
    /// Restores the backup in `file` into the keychain (`security backup restore`), all or nothing;
    /// `passcode` as for `createBackup`. Answers `.restore`.
    case restoreBackup(file: BackupFile, password: SecureBytes?, passcode: SecureBytes?)
    /// Moves the keychain to another kind of device root (`security device migrate-root tpm`), every
    /// item kept; only from the software root to a TPM (a TPM root never moves back). `passcode` is the
    /// keychain's, checked like an unlock, needed when it has one.
    case migrateDeviceRoot(to: DeviceRootKind, passcode: SecureBytes?)

    /// The request's name, for logs and tests; never its values.
    public var name: String {
        switch self {
        case .lock: "lock"
        case .unlock: "unlock"
        case .unlockForSession: "unlockForSession"
        case .setPasscode: "setPasscode"
        case .removePasscode: "removePasscode"
        case .setEraseAfterFailedAttempts: "setEraseAfterFailedAttempts"
        case .registerApp: "registerApp"
        case .listApps: "listApps"
        case .removeApp: "removeApp"
        case .setSecretServicePolicy: "setSecretServicePolicy"
        case .importSecrets: "importSecrets"
        case .sync: "sync"
        case .biometry: "biometry"
        case .companion: "companion"
        case .restart: "restart"
        case .eraseAllContentAndSettings: "eraseAllContentAndSettings"
        case .createBackup: "createBackup"
        case .restoreBackup: "restoreBackup"
        case .migrateDeviceRoot: "migrateDeviceRoot"
        }
    }
}

/// The kinds of device root a keychain can have.
public enum DeviceRootKind: UInt8, Sendable, CaseIterable {
    /// A 0600 file of 32 random bytes (the default; see docs/security.md).
    case software = 1
    /// A TPM 2.0 chip, which only securityd uses (docs/tpm.md).
    case tpm = 2

    /// The name the `security` command takes.
    public var name: String {
        switch self {
        case .software: "software"
        case .tpm: "tpm"
        }
    }
}
