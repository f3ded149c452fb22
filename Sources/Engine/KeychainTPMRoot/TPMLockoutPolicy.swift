import KeychainEngine
import KeychainTPM

/// The TPM's dictionary-attack parameters that a new TPM root sets: how many wrong passcodes the chip
/// takes before it refuses every one, and how fast it forgives them.
///
/// The defaults: 32 tries, then one more every 10 minutes (144 a day: every 6-digit passcode takes
/// about 19 years); the lockout authorization, if guessed wrong, waits a day. That holds only while
/// the lockout authorization is set: with it empty (a new TPM), anyone who can send TPM commands can
/// reset the lockout (docs/tpm.md). The parameters are the TPM's own, shared by everything that uses
/// it: they are set only with an empty lockout authorization, and otherwise left as the machine's
/// owner set them (and logged). The keychain's escalating delays and its optional erase
/// after ten failures apply on top, for every caller that does not go around the keychain's own code.
public struct TPMLockoutPolicy: Sendable, Equatable {
    public var maxTries: UInt32
    /// Seconds after which the chip forgets one wrong passcode.
    public var recoveryTime: UInt32
    public var lockoutRecovery: UInt32

    public init(maxTries: UInt32 = 32, recoveryTime: UInt32 = 600, lockoutRecovery: UInt32 = 86_400) {
        self.maxTries = maxTries
        self.recoveryTime = recoveryTime
        self.lockoutRecovery = lockoutRecovery
    }

    public static let standard = TPMLockoutPolicy()

    func apply(to tpm: TPM) {
        // With a lockout authorization set, trying the empty one would be a failure of its own (and
        // lock the owner out of the lockout hierarchy): the owner's parameters stay.
        guard let state = try? tpm.lockoutState() else {
            KeychainLog.error(
                "the TPM's dictionary-attack state could not be read: its parameters are left as they are")
            return
        }
        if state.lockoutAuthorizationSet {
            KeychainLog.error(
                "the TPM's dictionary-attack parameters are its owner's: \(state.maxTries) tries, one forgiven every \(state.recoveryTime) s"
            )
            return
        }
        do {
            try tpm.setLockoutParameters(
                maxTries: maxTries, recoveryTime: recoveryTime, lockoutRecovery: lockoutRecovery)
        } catch {
            let state = (try? tpm.lockoutState()).map {
                "\($0.maxTries) tries, one forgiven every \($0.recoveryTime) s"
            }
            KeychainLog.error(
                "the TPM's dictionary-attack parameters were left as they are (\(state ?? "unknown")): \(error)")
        }
    }
}
