import FoundationEssentials
import KeychainCore

/// How long to wait after consecutive failed passcode attempts, as iOS does:
/// 1–4 failures: none; 5: 1 minute; 6: 5 minutes; 7–8: 15 minutes; 9 and more: 1 hour.
public enum PasscodePolicy {
    // With the erase option on, `KeybagStatus.failuresBeforeErase` failures in a row erase the keychain.

    public static func delay(afterFailures failures: Int) -> TimeInterval {
        switch failures {
        case ..<5: 0
        case 5: 60
        case 6: 5 * 60
        case 7, 8: 15 * 60
        default: 60 * 60
        }
    }
}
