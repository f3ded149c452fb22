import Foundation
import KeychainCrypto
import KeychainEngine
import Security

/// The keychain this invocation works on, and the unlock prompt that an iPhone would show.
final class Session {
    /// The database path shown in the `keychain:` line.
    var databasePath: String { (EmbeddedKeychain.directory as NSString).appendingPathComponent(Keychain.databaseName) }

    func keychain() throws(Failure) -> Keychain {
        do {
            return try EmbeddedKeychain.current()
        } catch {
            throw .keychain(errSecNotAvailable, function: "SecKeychainCopyDefault", detail: error.message)
        }
    }

    /// Runs a SecItem call; if it meets a locked class and standard input is a terminal, asks for the
    /// passcode, unlocks (for this process) and tries again.
    func retryingWhenLocked(_ call: () -> OSStatus) -> OSStatus {
        var status = call()
        var attempts = 0
        while status == errSecInteractionNotAllowed, Terminal.inputIsTerminal, attempts < 3 {
            attempts += 1
            guard let keychain = try? keychain(), keychain.status.passcodeSet,
                let passcode = Terminal.readSecret(prompt: "password to unlock default: ")
            else { return status }
            do {
                try keychain.unlock(passcode: passcode)
            } catch {
                FileHandle.standardError.write(Data("security: \(Function.unlock): \(error.message)\n".utf8))
                continue
            }
            status = call()
        }
        return status
    }
}

extension Error {
    /// A keychain error's own message, for the few places the CLI reports one directly.
    var message: String { (self as? KeychainError)?.message ?? "\(self)" }
}
