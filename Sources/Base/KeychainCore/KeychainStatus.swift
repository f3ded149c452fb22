import FoundationEssentials

/// The lock state of a keychain, as an app sees it.
public enum LockState: String, Sendable, Equatable {
    /// No passcode: every class is available at all times (`whenPasscodeSet` does not exist).
    case noPasscode
    /// Passcode set, not unlocked since start (of the process, or of the daemon): only class D.
    case beforeFirstUnlock
    /// Passcode set and unlocked: every class is available.
    case unlocked
    /// Passcode set, unlocked once and locked again: classes C and D are available.
    case locked
}

/// A snapshot of the keybag for display (`security show-keychain-info`) and for decisions.
public struct KeybagStatus: Sendable, Equatable {
    /// With the erase option on, this many consecutive failed passcode attempts erase the keychain.
    public static let failuresBeforeErase = 10

    /// Which classes are available now.
    public var lockState: LockState
    /// Whether the keychain has a passcode (every state but `noPasscode`).
    public var passcodeSet: Bool { lockState != .noPasscode }
    /// Consecutive failed passcode attempts since the last right one.
    public var failedAttempts: Int
    /// When the next passcode attempt is allowed, if it is not allowed now.
    public var nextAttemptAllowed: Date?
    /// Whether the erase after `failuresBeforeErase` failures is on.
    public var wipeAfterFailures: Bool
    /// Names the device root the keybag is wrapped by: software (and its file) or a TPM (and which).
    public var deviceRoot: String

    /// A snapshot as the keybag reports it.
    public init(
        lockState: LockState, failedAttempts: Int, nextAttemptAllowed: Date?, wipeAfterFailures: Bool,
        deviceRoot: String = ""
    ) {
        self.lockState = lockState
        self.failedAttempts = failedAttempts
        self.nextAttemptAllowed = nextAttemptAllowed
        self.wipeAfterFailures = wipeAfterFailures
        self.deviceRoot = deviceRoot
    }
}
