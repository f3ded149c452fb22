import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainStorage

#if canImport(Glibc)
    import Glibc
#endif

/// "Erase All Content and Settings", as an iPhone does it: the device scenario a test scripts with
/// `security device erase`.
extension Keychain {
    /// Whether `eraseAllContentAndSettings` or `migrateDeviceRoot` was called on this object: it serves
    /// nothing more, and the directory is opened again (the new keychain, or the same one under its
    /// new root).
    public var isRetired: Bool { retired.load(ordering: .acquiring) }

    /// Erases every item, the keybag and the device root. The next open of the directory makes a new
    /// keychain under a new root: a backup made before no longer brings back `ThisDeviceOnly` items,
    /// and a device-bound one (`--no-password`) restores nothing. (A daemon removes its app registry
    /// too, as an iPhone's erase removes its apps.)
    ///
    /// In this order: the items (in one transaction), then the keybag, then the root. A process killed
    /// in between leaves no item for an old keybag to open; killed between the keybag and the root, the
    /// new keychain is made under the old root (the one window where the root survives an erase).
    public func eraseAllContentAndSettings() throws {
        try perform { try administration.withLock { _ in try eraseLocked() } }
    }

    private func eraseLocked() throws {
        try itemTransaction { connection in
            try ItemStore(connection: connection).deleteAll()
            // Sync's state is sealed under class keys that go now: the device leaves its account too.
            try SyncLocal.forgetState(connection)
        }
        // A hardware root revokes what it keeps first, so no copy of the old files opens again; if it
        // cannot, the erase fails here and can be tried again.
        try keybag.retireRoot()
        retired.store(true, ordering: .releasing)
        keybag.retire()
        sessionUnlock?.remove()
        for path in [PathText.join(directory, "keybag"), deviceRootPath] {
            guard unlink(path) == 0 || errno == ENOENT else {
                throw KeychainError.ioError("cannot remove \(path): \(String(cString: strerror(errno)))")
            }
        }
        keybag.releaseRoot()
        pool.closeIdleConnections()
        // The directory is no longer this object's: the next open, in this process too, claims it.
        ownerLock.withLock { $0 = nil }
    }
}
