import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import Security

/// The keychain service this invocation works on (the same one the Security API uses), and the
/// unlock prompt that an iPhone would show.
final class Session {
    /// The database path shown in the `keychain:` line, asked of the service once.
    lazy var databasePath: String = (try? keychain().location()) ?? ""

    /// The keychain directory.
    var directory: String { (databasePath as NSString).deletingLastPathComponent }

    /// Checks the keychain names left after a verb's options. macOS takes them as keychains to use; this
    /// store has one, so its own database (by its path, or by its file name alone, as macOS finds
    /// `login.keychain-db` in the keychains folder) or directory is accepted and any other name fails as
    /// macOS fails for a keychain it cannot find, before anything is written (a password flag that took
    /// the next option as its value leaves that option's value behind here).
    func checkKeychainNames(_ names: [CommandArgument], function: String) throws(Failure) {
        guard !names.isEmpty else { return }
        let own = [databasePath, directory].map { ($0 as NSString).standardizingPath }
        let fileName = (databasePath as NSString).lastPathComponent
        // The name is not repeated: after a flag that took the next argument as its value, what is left
        // may be a password.
        for name in names
        where !own.contains((name.text as NSString).standardizingPath) && (fileName.isEmpty || name.text != fileName) {
            throw .keychain(
                errSecNoSuchKeychain, function: function,
                detail:
                    "an argument after the options names a keychain; only this keychain's database (by its file name or path) or directory is accepted"
            )
        }
    }

    func keychain() throws(Failure) -> any KeychainService {
        do {
            return try KeychainServices.current()
        } catch {
            // A keychain that cannot be opened is not available, unless the disk is full (opening writes).
            let status = (error as? KeychainError)?.code == .diskFull ? errSecDiskFull : errSecNotAvailable
            throw .keychain(status, function: "SecKeychainCopyDefault", detail: error.message)
        }
    }

    /// The service's status; a keychain that cannot answer is not available.
    func status() throws(Failure) -> KeybagStatus {
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
    func retryingWhenLocked(_ call: () -> OSStatus) throws(Failure) -> OSStatus {
        let status = call()
        guard status == errSecInteractionNotAllowed, try unlockedOnTerminal() else { return status }
        return call()
    }

    /// After a call met a locked class: when standard input is a terminal and the keychain has a
    /// passcode, asks for it (as `tryTerminalPasscodes` does) and unlocks for this process. True when it
    /// is unlocked now, so the call can be made again.
    private func unlockedOnTerminal() throws(Failure) -> Bool {
        guard Terminal.inputIsTerminal, let keychain = try? keychain(), (try? keychain.status())?.passcodeSet == true
        else { return false }
        return try tryTerminalPasscodes(prompt: "password to unlock default: ", function: Function.unlock) {
            try keychain.unlock(passcode: $0)
        }
    }

    /// The secret alone that `query` (data, one match) finds, asked of the keychain service without the
    /// Security API's objects, with the statuses and reasons SecItemCopyMatching would give (recorded
    /// for `withServiceReason` as it records them). A locked class asks for the passcode on a terminal,
    /// as `retryingWhenLocked` does; a match without data is not found, as for a search that asked for it.
    func findSecret(_ query: [String: ItemValue], function: String) throws(Failure) -> SecureBytes {
        func lookUp() -> Result<ItemResult?, any Error> {
            Result { try KeychainServices.current().copyMatching(query) }
        }
        var found = lookUp()
        if case .failure(let error as KeychainError) = found, error.code == .interactionNotAllowed,
            try unlockedOnTerminal()
        {
            found = lookUp()
        }
        switch found {
        case .success(.secret(let secret)?): return secret
        case .success(.data(let data)?): return SecureBytes(copying: data)
        case .success: throw .keychain(errSecItemNotFound, function: function)
        case .failure(let error as KeychainError):
            SecItemFailure.record(error)
            throw .keychain(error.osStatus, function: function)
        case .failure: throw .keychain(errSecInternalComponent, function: function)
        }
    }

    /// How many wrong passcodes typed on a terminal end a command, as sudo ends after three.
    static let terminalAttempts = 3

    /// Gives `attempt` passcodes typed on the terminal (no echo) until one is right: an empty line is
    /// asked again without being sent (it is no passcode, and the keychain would count it as a wrong
    /// one); a wrong passcode is reported as one from standard input is and asked again, and the third
    /// ends the command with that failure. Any other failure ends it at once. `first` is a passcode
    /// already typed, the first attempt. False when input ended before a passcode was typed.
    func tryTerminalPasscodes(
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
                FileHandle.standardError.write(Data((failure.text + "\n").utf8))
            }
        }
    }
}

extension Session {
    /// Every item of `itemClass` the caller can see, synchronizable or not, as the query's `returning`
    /// keys give them (attributes, references...), each cast to `T`; none when there is none. A locked
    /// class asks for the passcode on a terminal, as every search of the command does.
    func allItems<T>(of itemClass: CFString, returning: [String: Any], as _: T.Type, function: String)
        throws(Failure) -> [T]
    {
        var query: [String: Any] = [
            kSecClass as String: itemClass, kSecMatchLimit as String: kSecMatchLimitAll,
            kSecAttrSynchronizable as String: kSecAttrSynchronizableAny,
        ]
        query.merge(returning) { $1 }
        var result: CFTypeRef?
        let status = try retryingWhenLocked { SecItemCopyMatching(query as CFDictionary, &result) }
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess, let items = result as? [T] else {
            throw .keychain(status == errSecSuccess ? errSecInternalComponent : status, function: function)
        }
        return items
    }

    /// The data of an item found with its persistent reference, asked for alone: Foundation on Linux
    /// bridges an `NSData` inside a dictionary to `Data` a byte at a time (about half a second for
    /// 10 MiB), while data returned alone is copied at once. Nil when the item came without a persistent
    /// reference (it was not asked for).
    func secret(of item: [String: Any]) throws(Failure) -> Data? {
        guard let reference = item[kSecValuePersistentRef as String] as? Data else { return nil }
        let query: [String: Any] = [kSecValuePersistentRef as String: reference, kSecReturnData as String: true]
        var result: CFTypeRef?
        let status = try retryingWhenLocked { SecItemCopyMatching(query as CFDictionary, &result) }
        guard status == errSecSuccess, let data = result as? NSData else {
            throw .keychain(status == errSecSuccess ? errSecItemNotFound : status, function: Function.search)
        }
        return Data(bytes: data.bytes, count: data.length)
    }
}

extension Error {
    /// A keychain error's own message, for the few places the CLI reports one directly.
    var message: String { (self as? KeychainError)?.message ?? "\(self)" }
}

extension Session {
    /// The keychain's passcode for a request that reads or writes every group (a backup, a restore, an
    /// import): `-p`, else asked for on a terminal or read as a line of standard input when the keychain
    /// has one and the request needs it (through a daemon always; embedded, while it is locked).
    func wholeKeychainPasscode(_ arguments: Arguments) throws(Failure) -> SecureBytes? {
        if let given = arguments.bytes("p") { return SecureBytes(copying: given) }
        let status = try status()
        guard status.passcodeSet else { return nil }
        guard KeychainServices.daemonSocketInUse() != nil || status.lockState != .unlocked else { return nil }
        let passcode =
            Terminal.inputIsTerminal ? Terminal.readPasscode(prompt: "keychain passcode: ") : Terminal.readLine()
        guard let passcode else { throw .message("no keychain passcode entered") }
        return passcode
    }
}
