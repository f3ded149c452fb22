import FoundationEssentials
import KeychainCore

/// Why the keybag refused. The engine maps these to Apple's status codes.
public enum KeybagError: Error, Equatable, Sendable {
    /// The class key is not in memory: locked, or before the first unlock since start.
    case locked(ProtectionClass)
    /// The class does not exist now: `whenPasscodeSetThisDeviceOnly` without a passcode.
    case classUnavailable(ProtectionClass)
    /// The passcode is wrong; `failedAttempts` counts consecutive failures.
    case wrongPasscode(failedAttempts: Int)
    /// Too many failures: the next attempt is allowed at `retryAt`.
    case attemptsThrottled(retryAt: Date)
    /// The operation needs the current passcode and none (or an empty one) was given.
    case passcodeRequired
    /// A passcode must not be empty; removing one is its own operation.
    case emptyPasscode
    /// No passcode is set, so there is nothing to change or remove.
    case noPasscodeSet
    /// The keybag, or a key in it, was not made with this device's root (a copied or restored keybag).
    case foreignDevice(String)
    /// The keybag file is damaged.
    case corrupt(String)
    /// The keybag or root file could not be read or written.
    case io(String)
    /// The passcode attempt could not be counted on disk, so it was refused without being checked.
    case attemptNotRecorded(String)
    /// The device root cannot be used now: a TPM that is gone, cleared or replaced, a counter deleted,
    /// or a root this process does not open. Nothing falls back to another root.
    case deviceRootUnavailable(String)
    /// The device root's own guess limit is in force (a TPM's dictionary-attack lockout): no passcode
    /// is checked before `retryAfter` seconds.
    case deviceRootLockedOut(retryAfter: Int)
    /// The keybag is older than the device root's counters say it must be: a copy put back.
    case rolledBack(String)
    /// The tenth failed attempt erased the keychain (only when that option is on).
    case wiped
    /// The keychain was erased, but its items could not be deleted: they are undecryptable with the new
    /// keybag, and would open again with an earlier copy of the old one.
    case wipedLeavingItems(String)
}

extension KeybagError {
    /// The device root refused before checking anything: its lockout, or the root unusable.
    var isDeviceRootRefusal: Bool {
        switch self {
        case .deviceRootLockedOut, .deviceRootUnavailable: true
        default: false
        }
    }
}
