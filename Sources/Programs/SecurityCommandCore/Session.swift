import KeychainBytes
import KeychainCore
import KeychainEnvironment
import KeychainStatus

/// The keychain service this invocation works on (the same one the Security API uses), and the
/// unlock prompt that an iPhone would show.
package final class Session {
    package init() {}

    /// Runs one invocation in a new session and returns its exit status, having written its output and
    /// messages: a failure is reported with the daemon's reason where it has one (`lastFailure`: this
    /// session's last failed call's, else `elsewhere`'s). The keychain's connections are closed
    /// afterwards, so that a process about to exit leaves a database the next one opens without
    /// replaying a log.
    package static func runInvocation(
        reasonsElsewhere elsewhere: () -> (status: OSStatus, reason: String)? = { nil },
        _ body: (Session) throws(Failure) -> Void
    ) -> Int32 {
        defer { KeychainServices.closeConnections() }
        let session = Session()
        do {
            try body(session)
            return 0
        } catch {
            let failure = error.withServiceReason(last: session.lastServiceFailure ?? elsewhere())
            StandardError.write(failure.text + "\n")
            return failure.exitStatus
        }
    }

    /// The database path shown in the `keychain:` line, asked of the service once.
    package lazy var databasePath: String = (try? keychain().location()) ?? ""

    /// The keychain directory.
    package var directory: String { PathText.parent(databasePath) }

    /// Checks the keychain names left after a verb's options. macOS takes them as keychains to use; this
    /// store has one, so its own database (by its path, or by its file name alone, as macOS finds
    /// `login.keychain-db` in the keychains folder) or directory is accepted and any other name fails as
    /// macOS fails for a keychain it cannot find, before anything is written (a password flag that took
    /// the next option as its value leaves that option's value behind here).
    package func checkKeychainNames(_ names: [CommandArgument], function: String) throws(Failure) {
        guard !names.isEmpty else { return }
        let own = [databasePath, directory].map(PathText.standardized)
        let fileName = PathText.lastComponent(databasePath)
        // The name is not repeated: after a flag that took the next argument as its value, what is left
        // may be a password.
        for name in names
        where !own.contains(PathText.standardized(name.text)) && (fileName.isEmpty || name.text != fileName) {
            throw .keychain(
                errSecNoSuchKeychain, function: function,
                detail:
                    "an argument after the options names a keychain; only this keychain's database (by its file name or path) or directory is accepted"
            )
        }
    }

    package func keychain() throws(Failure) -> any KeychainService {
        do {
            return try KeychainServices.current()
        } catch {
            // A keychain that cannot be opened is not available, unless the disk is full (opening writes).
            let status = (error as? KeychainError)?.code == .diskFull ? errSecDiskFull : errSecNotAvailable
            throw .keychain(status, function: "SecKeychainCopyDefault", detail: error.message)
        }
    }

    /// The service's status; a keychain that cannot answer is not available.
    package func status() throws(Failure) -> KeybagStatus {
        do {
            return try keychain().status()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .keychain(errSecNotAvailable, function: Function.info, detail: error.message)
        }
    }

    /// Runs a SecItem call; if it meets a locked class and standard input is a terminal, asks for the
    /// passcode (as `tryTerminalPasscodes` does), unlocks (for this process) and tries again.
    package func retryingWhenLocked(_ call: () -> OSStatus) throws(Failure) -> OSStatus {
        let status = call()
        guard status == errSecInteractionNotAllowed, try unlockedOnTerminal() else { return status }
        return call()
    }

    /// After a call met a locked class: when standard input is a terminal and the keychain has a
    /// passcode, asks for it (as `tryTerminalPasscodes` does) and unlocks for this process. True when it
    /// is unlocked now, so the call can be made again.
    package func unlockedOnTerminal() throws(Failure) -> Bool {
        guard Terminal.inputIsTerminal, let keychain = try? keychain(), (try? keychain.status())?.passcodeSet == true
        else { return false }
        return try tryTerminalPasscodes(prompt: "password to unlock default: ", function: Function.unlock) {
            try keychain.unlock(passcode: $0)
        }
    }

    /// The status and reason of this invocation's last keychain call that failed with a keychain error,
    /// made here rather than through the Security API (which keeps its own): for `withServiceReason`.
    package private(set) var lastServiceFailure: (status: OSStatus, reason: String)?

    /// Makes a call to the keychain service, without the Security API's objects; if it meets a locked
    /// class and standard input is a terminal, asks for the passcode (as `retryingWhenLocked` does) and
    /// makes it again. A keychain error ends it as SecItem's status would, with `function`, and is
    /// recorded in `lastServiceFailure` for `withServiceReason`.
    package func callingService<Answer>(
        function: String, _ call: (any KeychainService) throws -> Answer
    ) throws(Failure) -> Answer {
        func attempt() -> Result<Answer, any Error> { Result { try call(try KeychainServices.current()) } }
        var outcome = attempt()
        if case .failure(let error as KeychainError) = outcome, error.code == .interactionNotAllowed,
            try unlockedOnTerminal()
        {
            outcome = attempt()
        }
        switch outcome {
        case .success(let answer): return answer
        case .failure(let error as KeychainError):
            lastServiceFailure = (error.osStatus, error.reason)
            throw .keychain(error.osStatus, function: function)
        case .failure: throw .keychain(errSecInternalComponent, function: function)
        }
    }

    /// The secret alone that `query` (data, one match) finds, as SecItemCopyMatching would find it; a
    /// match without data is not found, as for a search that asked for it.
    package func findSecret(_ query: [String: ItemValue], function: String) throws(Failure) -> SecureBytes {
        switch try callingService(function: function, { try $0.copyMatching(query) }) {
        case .secret(let secret)?: return secret
        case .data(let data)?: return SecureBytes(copying: data)
        default: throw .keychain(errSecItemNotFound, function: function)
        }
    }

    /// How many wrong passcodes typed on a terminal end a command, as sudo ends after three.
    package static let terminalAttempts = 3

    /// Gives `attempt` passcodes typed on the terminal (no echo) until one is right: an empty line is
    /// asked again without being sent (it is no passcode, and the keychain would count it as a wrong
    /// one); a wrong passcode is reported as one from standard input is and asked again, and the third
    /// ends the command with that failure. Any other failure ends it at once. `first` is a passcode
    /// already typed, the first attempt. False when input ended before a passcode was typed.
    package func tryTerminalPasscodes(
        prompt: String, function: String, first: SecureBytes? = nil, _ attempt: (SecureBytes) throws -> Void
    ) throws(Failure) -> Bool {
        var typed = first
        var wrong = 0
        while true {
            guard let passcode = typed ?? Terminal.readPasscode(prompt: prompt) else { return false }
            typed = nil
            do {
                try attempt(passcode)
                return true
            } catch let failure as Failure {
                throw failure
            } catch {
                let failure = Failure.from(error, function: function)
                wrong += 1
                guard (error as? KeychainError)?.code == .authenticationFailed, wrong < Self.terminalAttempts else {
                    throw failure
                }
                StandardError.write(failure.text + "\n")
            }
        }
    }
}

extension Error {
    /// A keychain error's own message, for the few places the CLI reports one directly.
    package var message: String { (self as? KeychainError)?.message ?? "\(self)" }
}
