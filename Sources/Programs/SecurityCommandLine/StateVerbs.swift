import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import Security
import SecurityCommandCore

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
        // Typed on a terminal, a wrong current passcode is asked again (up to three times, the new one kept).
        let oldPrompt = "Old Password: "
        let oldFromTerminal = hasPasscode && old == nil && Terminal.inputIsTerminal
        if hasPasscode, old == nil {
            old = try readPasscode(prompt: oldPrompt)
        }
        func withOld(_ body: (SecureBytes?) throws -> Void) throws(Failure) {
            guard oldFromTerminal else {
                do {
                    try body(old)
                } catch {
                    throw Failure.from(error, function: Function.changePassword)
                }
                return
            }
            guard
                try session.tryTerminalPasscodes(prompt: oldPrompt, function: Function.changePassword, first: old, body)
            else { throw .message("no passcode entered") }
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
        if let new, new.count > 0 {
            try withOld { try keychain.setPasscode(new, current: hasPasscode ? $0 : nil) }
            return
        }
        guard hasPasscode, old != nil else { throw .message("no passcode is set") }
        if !arguments.has("y") {
            guard Terminal.inputIsTerminal else {
                throw .message("removing the passcode deletes WhenPasscodeSetThisDeviceOnly items; confirm with -y")
            }
            let answer = Terminal.ask(
                "Remove the passcode? Items only available while a passcode is set will be deleted. [y/N] ")
            guard answer?.lowercased() == "y" || answer?.lowercased() == "yes" else {
                throw .message("passcode kept")
            }
        }
        try withOld { current in
            guard let current else { throw Failure.message("no passcode is set") }
            try keychain.removePasscode(current: current)
        }
    }

    func lock(_ rawArguments: [CommandArgument]) throws(Failure) {
        try checkOnlyKeychainNames(rawArguments, verb: "lock-keychain", function: Function.lock)
        do {
            try session.keychain().lock()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.from(error, function: Function.lock)
        }
    }

    func unlock(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["p"], booleans: ["u"], long: ["session"])
        } catch {
            throw .usage(verb: "unlock-keychain", message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.unlock)
        let keychain = try session.keychain()
        guard try session.status().passcodeSet else { return }
        // --session: every later embedded process of this user starts unlocked, until a lock or a reboot.
        let forSession = arguments.has(long: "session")
        let unlock = { (passcode: SecureBytes) throws in
            if forSession {
                try keychain.unlockForSession(passcode: passcode)
            } else {
                try keychain.unlock(passcode: passcode)
            }
        }
        if arguments.bytes("p") == nil, Terminal.inputIsTerminal {
            let unlocked = try session.tryTerminalPasscodes(
                prompt: "password to unlock default: ", function: Function.unlock
            ) { try unlock($0) }
            guard unlocked else { throw .message("no passcode entered") }
            return
        }
        guard let passcode = arguments.bytes("p").map({ SecureBytes(copying: $0) }) ?? Terminal.readLine() else {
            throw .message("no passcode entered")
        }
        do {
            try unlock(passcode)
        } catch {
            throw Failure.from(error, function: Function.unlock)
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
        if let socket = KeychainServices.daemonSocketInUse() {
            lines.insert("    served by: the keychain daemon at \(socket)", at: 1)
        } else {
            lines.insert("    served by: the embedded keychain (no daemon), in \(session.directory)", at: 1)
        }
        if let next = status.nextAttemptAllowed {
            let seconds = Int(exactly: min(max(next.timeIntervalSinceNow.rounded(.up), 0), 1e9)) ?? 0
            lines.append("    next attempt in: \(seconds) s")
        }
        lines.append(
            "    erase after \(KeybagStatus.failuresBeforeErase) failed attempts: \(status.wipeAfterFailures ? "on" : "off")"
        )
        if !status.deviceRoot.isEmpty { lines.append("    device root: \(status.deviceRoot)") }
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

    /// A passcode from the terminal (no echo; Enter alone is asked again), or the next line of standard
    /// input.
    private func readPasscode(prompt: String) throws(Failure) -> SecureBytes {
        let passcode = Terminal.inputIsTerminal ? Terminal.readPasscode(prompt: prompt) : Terminal.readLine()
        guard let passcode else { throw .message("no passcode entered") }
        return passcode
    }
}
