import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainKeybag
import KeychainStorage
import KeychainSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Moving a keychain made with the software root to a hardware root (`security device migrate-root
/// tpm`), without losing an item; never the other way.
///
/// The new root takes over the software root's secret, sealed in its hardware, so that what that root
/// wrapped or authenticated (enclave keys' private halves, device-bound backups, the app registry,
/// biometric enrollments) still opens. The keybag is new: new class keys, its secret and the passcode
/// bound to the new root. Every item moves to the new class keys (its item keys re-wrapped, its
/// contents untouched), so a copy of the old software root and keybag opens nothing added or changed
/// after the move.
///
/// The steps, each a file or a transaction: the new root's file and the new keybag are written beside
/// the old ones (`….migrating`); one transaction moves every item and sets the `itemsMigrated` mark (the
/// point of no return); the new root's file, then the new keybag, are renamed into place; the mark is
/// cleared. A process killed before the transaction leaves the old keychain whole (the next open removes
/// the new files and frees the new root); after it, the next open finishes the renames
/// (`recoverMigration`).
extension Keychain {
    /// How many rows moved to the new class keys, and how many were left as they were because they no
    /// longer opened (damaged before the move; they stay unreadable, as they were).
    public struct DeviceRootMigration: Sendable, Equatable {
        public let movedItems: Int
        public let unreadableItems: Int

        public init(movedItems: Int, unreadableItems: Int) {
            self.movedItems = movedItems
            self.unreadableItems = unreadableItems
        }
    }

    /// Moves the keychain to a root of `kind`, the one its `DeviceRootProvider` makes
    /// (`createMigrationTarget`: a TPM for the daemon's; only `.tpm` is a kind to move to). `passcode` is checked and counted like an unlock; it is needed when one is set.
    /// This object serves nothing afterwards (`isRetired`): open the directory again.
    ///
    /// - Throws: `.invalidParameter` for a move to the software root (a TPM root never moves back: its
    ///   keys cannot leave the chip) or from a root that is not the software one; `.notAvailable` when
    ///   there is nothing to move to.
    public func migrateDeviceRoot(to kind: DeviceRootKind, passcode: SecureBytes?) throws -> DeviceRootMigration {
        try perform {
            let inheritance = try keybag.rootInheritance()
            guard kind == .tpm else {
                throw KeychainError.invalidParameter(
                    inheritance != nil
                        ? "the device root is the software root already"
                        : "a TPM root never moves back to the software root: its keys cannot leave the chip")
            }
            guard let inheritance else { throw KeychainError.invalidParameter("the device root is a TPM already") }
            if keybag.status.passcodeSet, passcode == nil {
                throw KeychainError.authenticationFailed("moving the device root needs the keychain's passcode")
            }
            // One whole-keychain change at a time on this object: an erase and a move never interleave.
            return try administration.withLock { _ in
                try move(inheriting: inheritance, passcode: passcode)
            }
        }
    }

    private func move(inheriting inheritance: InheritedDeviceRoot, passcode: SecureBytes?) throws
        -> DeviceRootMigration
    {
        let staging = Self.migrationStaging(directory: directory, rootPath: deviceRootPath)
        var target: (any DeviceRoot)?
        var committed = false
        var retiredHere = false
        var report = DeviceRootMigration(movedItems: 0, unreadableItems: 0)
        do {
            try keybag.migrate(
                passcode: passcode, stagingPath: staging.keybag,
                makeTarget: {
                    // Under the keybag's lock, the passcode proved: what an earlier attempt left goes first.
                    try Self.recoverMigrationLocked(
                        staging, directory: directory, rootPath: deviceRootPath, deviceRoots: deviceRoots)
                    try pool.writeTransaction { try ItemStore(connection: $0).setMark(.itemsMigrated, to: nil) }
                    let made = try deviceRoots.createMigrationTarget(path: staging.root, inheriting: inheritance)
                    target = made
                    return made
                },
                commit: { migration in
                    report = try pool.writeTransaction { connection in
                        let report = try Self.moveItems(ItemStore(connection: connection), migration)
                        // Every item write after this one in the queue is refused (`itemTransaction`).
                        guard
                            retired.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
                                .exchanged
                        else { throw Self.retiredError }
                        retiredHere = true
                        return report
                    }
                    committed = true
                })
        } catch {
            if !committed {
                // The transaction did not commit: nothing moved, and this object serves on.
                if retiredHere { retired.store(false, ordering: .releasing) }
                for path in [staging.root, staging.keybag] { unlink(path) }
                target?.release()
                throw error
            }
        }
        // Past the point of no return: this object is done whatever follows, and an open finishes what
        // the renames below leave undone.
        keybag.retire()
        sessionUnlock?.remove()
        pool.closeIdleConnections()
        defer { ownerLock.withLock { $0 = nil } }
        try Self.finishMigration(staging, rootPath: deviceRootPath, directory: directory)
        do {
            try pool.writeTransaction { try ItemStore(connection: $0).setMark(.itemsMigrated, to: nil) }
        } catch {
            // Harmless: the mark acts only beside staging files, and the next move clears it first.
            KeychainLog.error("the mark of a finished move could not be cleared: \(Self.describe(error))")
        }
        return report
    }

    /// Where the new root's file and keybag are written before they are renamed into place.
    static func migrationStaging(directory: String, rootPath: String) -> (root: String, keybag: String) {
        (rootPath + ".migrating", PathText.join(directory, "keybag") + ".migrating")
    }

    /// Every row's item keys re-wrapped for the new class keys, and the mark set, in the caller's
    /// transaction.
    private static func moveItems(_ store: ItemStore, _ migration: Keybag.Migration) throws -> DeviceRootMigration {
        var moved = 0
        var unreadable = 0
        for rowID in try store.allRowIDs() {
            guard let row = try store.item(rowID: rowID), let itemClass = ItemClass(rawValue: row.itemClass),
                let protection = ProtectionClass(rawValue: row.protectionClass),
                let oldKey = migration.oldKeys[protection], let newKey = migration.newKeys[protection]
            else {
                unreadable += 1
                continue
            }
            let binding = RowBinding(row: row, itemClass: itemClass, protection: protection)
            do {
                let metadata = try ItemCrypto.rewrap(
                    row.metadata, part: .metadata, binding: binding, classKey: oldKey, newClassKey: newKey)
                let secret = try ItemCrypto.rewrap(
                    row.secret, part: .secret, binding: binding, classKey: oldKey, newClassKey: newKey)
                try store.replaceBlobs(rowID: rowID, metadata: metadata, secret: secret)
                moved += 1
            } catch is ItemCrypto.Failure {
                unreadable += 1
            }
        }
        // Sync's own state (device keys, zone keys, names) is sealed under the same class keys.
        try SyncLocal.resealState(store.connection, from: migration.oldKeys, to: migration.newKeys)
        try store.setMark(.itemsMigrated, to: 1)
        return DeviceRootMigration(movedItems: moved, unreadableItems: unreadable)
    }

    /// Renames the new root's file, then the new keybag, into place (each only if still waiting).
    private static func finishMigration(
        _ staging: (root: String, keybag: String), rootPath: String, directory: String
    ) throws {
        let keybagPath = PathText.join(directory, "keybag")
        for (from, to) in [(staging.root, rootPath), (staging.keybag, keybagPath)] {
            guard SecureFiles.identity(of: from) != nil else { continue }
            guard rename(from, to) == 0 else {
                throw KeychainError.ioError("cannot move \(from) into place: \(String(cString: strerror(errno)))")
            }
            SecureFiles.syncDirectory(of: to)
        }
    }

    /// Finishes or undoes a migration a killed process left (see the type's comment), before the
    /// root is opened: with the mark set the items are the new keybag's, so its files go into place;
    /// without it they are the old one's, so the new files go (and the new root frees what it kept).
    static func recoverMigration(directory: String, rootPath: String, deviceRoots: any DeviceRootProvider) throws {
        let staging = migrationStaging(directory: directory, rootPath: rootPath)
        guard SecureFiles.identity(of: staging.root) != nil || SecureFiles.identity(of: staging.keybag) != nil
        else { return }
        try SecureFiles.withDirectoryLock(directory) {
            try recoverMigrationLocked(staging, directory: directory, rootPath: rootPath, deviceRoots: deviceRoots)
        }
    }

    static func recoverMigrationLocked(
        _ staging: (root: String, keybag: String), directory: String, rootPath: String,
        deviceRoots: any DeviceRootProvider
    ) throws {
        let databasePath = PathText.join(directory, databaseName)
        let connection = try Connection(path: databasePath, create: false)
        let marked = try connection.writeTransaction { try ItemStore(connection: connection).mark(.itemsMigrated) }
        if marked != nil {
            try finishMigration(staging, rootPath: rootPath, directory: directory)
            try connection.writeTransaction { try ItemStore(connection: connection).setMark(.itemsMigrated, to: nil) }
            KeychainLog.error("finished moving the keychain to its new device root (the move was cut short)")
        } else {
            // The new root's counters are left defined: this file may be a copy of one that another
            // directory (the same keychain, moved) now uses, and freeing them would kill that one.
            if SecureFiles.identity(of: staging.root) != nil {
                KeychainLog.error("a move cut short left a device root whose TPM counters stay defined")
            }
            for path in [staging.root, staging.keybag] { unlink(path) }
            SecureFiles.syncDirectory(of: staging.keybag)
            KeychainLog.error("undid a move to a new device root that was cut short: the keychain is as it was")
        }
    }
}
