import FoundationEssentials
import KeychainKeybag
import KeychainStorage
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Failures of the layers below, as the engine reports them: Apple's status families (the SQLite and
/// keystore mappings of SecItem.m), with the cause logged where the caller can do nothing about it.
extension Keychain {
    static func unavailable(_ message: String) -> KeychainError {
        KeychainLog.error(message)
        return .notAvailable(message)
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as KeybagError:
            switch error {
            case .foreignDevice(let text), .corrupt(let text), .io(let text), .deviceRootUnavailable(let text),
                .rolledBack(let text):
                return text
            default: return "\(error)"
            }
        case let error as StorageError: return error.description
        case let error as SecureFiles.Failure: return error.description
        case let error as KeychainError: return error.message
        default: return "\(error)"
        }
    }

    /// Internal failures as Apple's status families (SQLite and keystore mappings of SecItem.m).
    static func translate(_ error: any Error) -> KeychainError {
        switch error {
        case let error as KeychainError:
            return error
        case let error as KeybagError:
            switch error {
            case .locked(let protectionClass):
                return .interactionNotAllowed("the keychain is locked (class \(protectionClass.attributeValue))")
            case .classUnavailable(let protectionClass):
                return .notAvailable("no key for class \(protectionClass.attributeValue): is a passcode set?")
            case .wrongPasscode(let failures):
                return .authenticationFailed("wrong passcode (\(failures) failed attempts in a row)")
            case .attemptsThrottled(let retryAt):
                let seconds = Int(exactly: min(max(retryAt.timeIntervalSinceNow.rounded(.up), 1), 1e9)) ?? 1
                return .interactionNotAllowed("too many failed attempts: try again in \(seconds) s")
            case .passcodeRequired: return .invalidParameter("the current passcode is required")
            case .emptyPasscode: return .invalidParameter("a passcode cannot be empty")
            case .noPasscodeSet: return .invalidParameter("no passcode is set")
            case .wiped, .wipedLeavingItems: return .authenticationFailed("the keychain was erased")
            case .attemptNotRecorded(let cause):
                return .ioError("the passcode attempt could not be recorded, so it was not checked: \(cause)")
            case .foreignDevice, .corrupt, .io: return unavailable("keybag: \(describe(error))")
            case .deviceRootUnavailable(let reason): return unavailable("device root: \(reason)")
            case .rolledBack(let reason): return unavailable("keybag refused: \(reason)")
            case .deviceRootLockedOut(let seconds):
                let message =
                    "the TPM's dictionary-attack lockout is in force: no passcode is checked for up to \(seconds) s"
                KeychainLog.error(message)
                return .authenticationFailed(message)
            }
        case let error as StorageError:
            switch error.kind {
            case .constraint: return .duplicateItem
            case .corrupt: return unavailable("the database is damaged: \(error.message)")
            case .readOnly: return .readOnly(error.message)
            case .full: return .diskFull
            case .io: return .ioError(error.message)
            case .noMemory: return .allocationFailed
            case .busy, .cannotOpen, .other: return unavailable("database: \(error.message)")
            }
        case let error as SecureFiles.Failure:
            // A keybag write that failed outside an attempt's count (a passcode change, say).
            if error.errno == ENOSPC || error.errno == EDQUOT { return .diskFull }
            return .ioError(error.description)
        default:
            return .internalError("\(error)")
        }
    }
}
