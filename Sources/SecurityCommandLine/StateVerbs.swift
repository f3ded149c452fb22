import Foundation
import KeychainCore
import KeychainCrypto
import Security

/// set-keychain-password, lock-keychain, unlock-keychain, show-keychain-info.
struct StateVerbs {
    let session: Session

    func setPassword(_ rawArguments: [CommandArgument]) throws(Failure) {
        let verb = "set-keychain-password"
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["o", "p"], booleans: ["y"])
        } catch {
            throw .usage(verb: verb, message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.changePassword)
        let keychain = try session.keychain()
        let hasPasscode = try session.status().passcodeSet
        // Without a terminal, standard input gives the passcodes one per line: the current one first (when
        // one is set and -o is not given), then the new one (when -p is not given). A passcode on the
        // command line is visible to every user in `ps`.
        var old = arguments.bytes("o").map { SecureBytes(copying: $0) }
        if hasPasscode, old == nil {
            old = try readPasscode(prompt: "Old Password: ")
        }
        var new = arguments.bytes("p").map { SecureBytes(copying: $0) }
        if new == nil {
            if Terminal.inputIsTerminal {
                guard let first = Terminal.readSecret(prompt: "New Password: "),
                    let second = Terminal.readSecret(prompt: "Retype New Password: ")
                else { throw .message("no passcode entered") }
                guard first.constantTimeEquals(second) else { throw .message("passwords don't match") }
                new = first
            } else {
                guard let line = Terminal.readLine() else {
                    throw .usage(verb: verb, message: "give the new passcode on standard input (or with -p)")
                }
                new = line
            }
        }
        do {
            if let new, new.count > 0 {
                try keychain.setPasscode(new, current: hasPasscode ? old : nil)
                return
            }
            guard hasPasscode, let old else { throw Failure.message("no passcode is set") }
            if !arguments.has("y") {
                guard Terminal.inputIsTerminal else {
                    throw Failure.message(
                        "removing the passcode deletes WhenPasscodeSetThisDeviceOnly items; confirm with -y")
                }
                let answer = Terminal.ask(
                    "Remove the passcode? Items only available while a passcode is set will be deleted. [y/N] ")
                guard answer?.lowercased() == "y" || answer?.lowercased() == "yes" else {
                    throw Failure.message("passcode kept")
                }
            }
            try keychain.removePasscode(current: old)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw failure(error, function: Function.changePassword)
        }
    }

    func lock(_ rawArguments: [CommandArgument]) throws(Failure) {
        try checkOnlyKeychainNames(rawArguments, verb: "lock-keychain", function: Function.lock)
        do {
            try session.keychain().lock()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw failure(error, function: Function.lock)
        }
    }

    func unlock(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["p"], booleans: ["u"])
        } catch {
            throw .usage(verb: "unlock-keychain", message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.unlock)
        let keychain = try session.keychain()
        guard try session.status().passcodeSet else { return }
        var passcode = arguments.bytes("p").map { SecureBytes(copying: $0) }
        if passcode == nil { passcode = try readPasscode(prompt: "password to unlock default: ") }
        guard let passcode else { return }
        do {
            try keychain.unlock(passcode: passcode)
        } catch {
            throw failure(error, function: Function.unlock)
        }
    }

    func showInfo(_ rawArguments: [CommandArgument]) throws(Failure) {
        try checkOnlyKeychainNames(rawArguments, verb: "show-keychain-info", function: Function.info)
        let status = try session.status()
        let state: String
        switch status.lockState {
        case .noPasscode: state = "unlocked (no passcode)"
        case .beforeFirstUnlock: state = "locked (before first unlock)"
        case .unlocked: state = "unlocked"
        case .locked: state = "locked"
        }
        var lines = [
            "Keychain \"\(session.directory)\"",
            "    state: \(state)",
            "    passcode: \(status.passcodeSet ? "set" : "not set")",
            "    failed attempts: \(status.failedAttempts)",
        ]
        if let next = status.nextAttemptAllowed {
            let seconds = Int(exactly: min(max(next.timeIntervalSinceNow.rounded(.up), 0), 1e9)) ?? 0
            lines.append("    next attempt in: \(seconds) s")
        }
        lines.append(
            "    erase after \(KeybagStatus.failuresBeforeErase) failed attempts: \(status.wipeAfterFailures ? "on" : "off")"
        )
        print(lines.joined(separator: "\n"))
    }

    /// For the verbs without options: what is given can only be keychain names.
    private func checkOnlyKeychainNames(_ arguments: [CommandArgument], verb: String, function: String) throws(Failure)
    {
        guard arguments.allSatisfy({ !$0.text.hasPrefix("-") }) else {
            throw .usage(verb: verb, message: "\(verb) takes no options")
        }
        try session.checkKeychainNames(arguments, function: function)
    }

    /// A passcode from the terminal (no echo), or the next line of standard input.
    private func readPasscode(prompt: String) throws(Failure) -> SecureBytes {
        let passcode = Terminal.inputIsTerminal ? Terminal.readSecret(prompt: prompt) : Terminal.readLine()
        guard let passcode else { throw .message("no passcode entered") }
        return passcode
    }

    /// A keychain error as macOS reports it: the status, and the keychain's reason where the status
    /// alone would leave the user guessing (which includes how many wrong passcodes were counted, and a
    /// daemon's refusal to set a passcode; delays speak for themselves).
    private func failure(_ error: any Error, function: String) -> Failure {
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
