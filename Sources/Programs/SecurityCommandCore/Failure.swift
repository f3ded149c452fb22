import KeychainCore
import KeychainEnvironment
import KeychainStatus

/// How a verb ends when it does not succeed; each case knows its exit status and its message.
package enum Failure: Error {
    /// Wrong usage: exit 2 and the verb's usage.
    case usage(verb: String?, message: String)
    /// A keychain status, reported as macOS does: `security: Function: message`, exit status = low byte;
    /// `detail` adds the keychain's own reason where the status alone would leave the user guessing.
    case keychain(OSStatus, function: String, detail: String? = nil)
    /// Anything else worth a message; exit 1.
    case message(String)

    package var exitStatus: Int32 {
        switch self {
        case .usage: 2
        case .keychain(let status, _, _): Int32(UInt32(bitPattern: status) & 0xff)
        case .message: 1
        }
    }

    package var text: String {
        switch self {
        case .usage(let verb, let message):
            let usage = verb.flatMap { Usage.text(for: $0) } ?? Usage.overview
            return message.isEmpty ? usage : "security: \(message)\n\(usage)"
        case .keychain(let status, let function, let detail):
            return "security: \(function): \(StatusMessages.message(for: status))" + (detail.map { " (\($0))" } ?? "")
        case .message(let text):
            return "security: \(text)"
        }
    }

    /// The same failure with the keychain's reason, when a keychain call's status was all it had and a
    /// daemon gave that status (`last`: the status and reason of this invocation's last failed call): a
    /// daemon refuses an executable (-34018) for one of several reasons, is unavailable (-25291) for more
    /// than one, and refuses a general-purpose tool's read (-25293) when the user cannot be asked, which
    /// only its own reason tells apart. The embedded keychain's statuses speak for themselves, as on macOS.
    package func withServiceReason(last: (status: OSStatus, reason: String)?) -> Failure {
        if case .keychain(errSecInteractionNotAllowed, let function, nil) = self,
            KeychainServices.daemonSocketInUse() == nil,
            let state = try? KeychainServices.current().status().lockState,
            state == .beforeFirstUnlock || state == .locked
        {
            // Embedded, every command is a new process that starts before the first unlock: say what to do.
            return .keychain(errSecInteractionNotAllowed, function: function, detail: Self.embeddedLockedHint)
        }
        guard case .keychain(let status, let function, nil) = self,
            status == errSecMissingEntitlement || status == errSecNotAvailable || status == errSecAuthFailed,
            KeychainServices.daemonSocketInUse() != nil, let last, last.status == status
        else { return self }
        return .keychain(status, function: function, detail: last.reason)
    }
}

extension Failure {
    package static let embeddedLockedHint =
        "the keychain has a passcode, and each command run without a daemon starts before its first unlock: "
        + "security unlock-keychain --session keeps it unlocked for this login session (until lock-keychain or a "
        + "reboot), or run securityd"

    /// A keychain error as macOS reports it: the status, and the keychain's reason where the status
    /// alone would leave the user guessing (which includes how many wrong passcodes were counted, and a
    /// daemon's refusal to set a passcode; delays speak for themselves).
    package static func from(_ error: any Error, function: String) -> Failure {
        if let failure = error as? Failure { return failure }
        guard let error = error as? KeychainError else {
            return .keychain(errSecInternalComponent, function: function, detail: "\(error)")
        }
        switch error.code {
        case .interactionNotAllowed, .invalidParameter:
            return .keychain(error.osStatus, function: function)
        default:
            return .keychain(error.osStatus, function: function, detail: error.reason)
        }
    }
}

extension Failure {
    /// A keychain error with its reason always, for verbs that have no macOS message to match (backup,
    /// device): the reason (a directory given as the file, a backup of another device) is what the user
    /// needs.
    package static func withReason(_ error: any Error, function: String) -> Failure {
        guard let error = error as? KeychainError else { return from(error, function: function) }
        return .keychain(error.osStatus, function: function, detail: error.reason)
    }
}

/// Apple's function names in macOS's messages, so scripts that match on them keep working.
package enum Function {
    package static let add = "SecKeychainItemCreateFromContent (<default>)"
    package static let search = "SecKeychainSearchCopyNext"
    package static let modify = "SecKeychainItemModifyContent"
    package static let delete = "SecKeychainItemDelete"
    package static let changePassword = "SecKeychainChangePassword"
    package static let unlock = "SecKeychainUnlock"
    package static let lock = "SecKeychainLock"
    package static let info = "SecKeychainGetStatus"
}
