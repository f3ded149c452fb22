import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// An embedded keychain's unlock held for the login session: "a device with a passcode, unlocked"
/// across processes, until it is locked or the machine restarts, as the daemon's unlock holds for all
/// its clients. Each embedded process otherwise starts before its first unlock.
///
/// What is held is the keybag's session token (the passcode key wrapped by the device root, bound to
/// the keybag, the passcode and the boot) in a 0600 file of the user's runtime directory
/// (`$XDG_RUNTIME_DIR/keychain`, a tmpfs that ends with the session or the boot). It gives up, while it
/// exists: a process of the same user opens the passcode classes without the passcode (as any app on
/// an unlocked iPhone reads them). It keeps: another user cannot read it (0700/0600); a copy of the
/// keychain directory does not contain it, and the token opens nothing without this device root and
/// this boot.
struct SessionUnlock: Sendable {
    let path: String

    /// The runtime directory for `directory`'s keychain, or nil when the environment gives none.
    init?(runtimeDirectory: String?, keychainDirectory: String) {
        guard let runtimeDirectory, runtimeDirectory.hasPrefix("/"),
            let digest = try? Digest.sha256(Data(keychainDirectory.utf8))
        else { return nil }
        let name = "session-" + Hex.encode(digest.prefix(12))
        path = PathText.join(PathText.join(runtimeDirectory, "keychain"), name)
    }

    /// The token, if one is held (a file that is not a private file of this user is not read).
    func read() -> Data? { (try? SecureFiles.read(path)) ?? nil }

    func write(_ token: Data) throws {
        do {
            try SecureFiles.ensureDirectory(PathText.parent(path))
            try SecureFiles.writeAtomically(token, to: path)
        } catch {
            throw KeychainError.ioError("cannot hold the unlock for the session in \(path): \(error)")
        }
    }

    func remove() { unlink(path) }
}
