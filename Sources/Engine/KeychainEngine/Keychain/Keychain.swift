import FoundationEssentials
import KeychainBytes
import KeychainCrypto
import KeychainKeybag
import KeychainStorage
import KeychainSystem
import Synchronization

/// Options for opening a keychain directory.
public struct KeychainOptions: Sendable {
    /// Where the software device root lives; nil means `device-root` inside the keychain directory.
    public var deviceRootPath: String?
    public var clock: any KeychainClock
    /// A fixed passcode KDF (tests); nil uses `PasscodeFunction.calibrated()`, never weaker than
    /// `PasscodeFunction.minimum`.
    public var passcodeFunction: PasscodeFunction?
    /// Database connections kept open for reads between uses: a few for an app, more for the daemon,
    /// whose clients read at once.
    public var idleConnections: Int
    /// What asks the user (biometry, a companion device, the passcode prompt); none unless given
    /// (KeychainAuthenticators makes the standard ones).
    public var authenticators: Authenticators
    /// The user's runtime directory (`$XDG_RUNTIME_DIR`), where an embedded keychain's unlock may be
    /// held for the login session (`unlockForSession`); nil: unlocks last for this process only.
    public var sessionDirectory: String?
    /// Who owns the directory while it is open: processes that open it themselves (embedded), any
    /// number of them, or one daemon alone (see `OwnerLock`).
    public var owner: KeychainOwner = .sharedWithOtherProcesses
    /// What opens (and makes) the device root: the software root's file by default; the daemon's
    /// provider opens a TPM root too (KeychainTPMRoot).
    public var deviceRoots: any DeviceRootProvider = SoftwareDeviceRootProvider()

    public init(
        deviceRootPath: String? = nil, clock: any KeychainClock = SystemClock(),
        passcodeFunction: PasscodeFunction? = nil, idleConnections: Int = 4, authenticators: Authenticators = .none
    ) {
        self.deviceRootPath = deviceRootPath
        self.clock = clock
        self.passcodeFunction = passcodeFunction
        self.idleConnections = idleConnections
        self.authenticators = authenticators
    }
}

/// Who holds a keychain directory open.
public enum KeychainOwner: Sendable, Equatable {
    /// This process, beside others that open the files themselves; refused while a daemon owns it.
    case sharedWithOtherProcesses
    /// A daemon, alone, for its life; `holder` (its pid and socket) is what a second one is told.
    case daemon(holder: String)
}

/// One keychain: a directory holding the encrypted database and the keybag, and the engine that
/// answers SecItem requests against it. The embedded `Security` module runs one per process; the
/// daemon will run one for all its clients.
///
/// Thread-safe: requests from many threads run concurrently (reads in parallel, writes serialized by
/// SQLite, which also orders them against other processes sharing the directory).
public final class Keychain: Sendable {
    public let directory: String
    public let databasePath: String
    let pool: ConnectionPool
    let keybag: Keybag
    let clock: any KeychainClock
    let authentication: AuthenticationBroker
    private let digestCache: Mutex<(SecureBytes, ItemDigests)?> = Mutex(nil)
    /// Held for as long as this keychain is open.
    /// Released by an erase, so that the directory's new keychain can be opened by this process.
    let ownerLock: Mutex<OwnerLock?>
    /// Where an unlock is held for the login session (embedded only).
    let sessionUnlock: SessionUnlock?
    /// The device root's file, which an erase removes.
    let deviceRootPath: String
    /// Set by `eraseAllContentAndSettings` and `migrateDeviceRoot`: this object no longer serves
    /// anything, and the directory is opened again.
    let retired = Atomic<Bool>(false)
    /// Whether this object has seen the sync ledger's tables made (a committed transaction did).
    let syncLedgerReady = Atomic<Bool>(false)
    /// Held by an erase and a move to another root, which must not interleave.
    let administration = Mutex<Void>(())
    /// What opens the device root, and makes the one a migration moves to.
    let deviceRoots: any DeviceRootProvider

    public static let databaseName = "keychain.db"

    /// Opens the keychain in `directory`, creating it (0700) with a new device root, keybag and
    /// database when it does not exist. A damaged database or a keybag from another device fails with
    /// `.notAvailable`, leaving the files untouched for recovery.
    ///
    /// `directory` is kept with its symbolic links resolved (after checking them): every file is then
    /// reached without following a link again.
    public init(directory given: String, options: KeychainOptions = KeychainOptions()) throws {
        let directory: String
        do {
            directory = try SecureFiles.ensureDirectory(given)
        } catch {
            throw Self.unavailable("cannot use keychain directory: \(error)")
        }
        self.directory = directory
        switch options.owner {
        case .sharedWithOtherProcesses: ownerLock = Mutex(try OwnerLock.share(directory: directory))
        case .daemon(let holder): ownerLock = Mutex(try OwnerLock.claim(directory: directory, holder: holder))
        }
        databasePath = PathText.join(directory, Self.databaseName)
        clock = options.clock
        deviceRootPath = options.deviceRootPath ?? PathText.join(directory, "device-root")
        deviceRoots = options.deviceRoots
        keybag = try Self.openKeybag(directory: directory, options: options)
        let host = AuthenticatorHost(directory: directory, keybag: keybag)
        authentication = AuthenticationBroker(
            biometry: options.authenticators.biometry(host),
            companion: options.authenticators.companion.map { $0(host) }, keybag: keybag,
            passcodePrompt: options.authenticators.passcodePrompt)
        pool = try Self.openDatabase(databasePath, idleConnections: options.idleConnections)
        sessionUnlock =
            options.owner == .sharedWithOtherProcesses
            ? SessionUnlock(runtimeDirectory: options.sessionDirectory, keychainDirectory: directory) : nil
        // A session unlock held by an earlier process: this one starts unlocked too. A token that no
        // longer opens (another passcode, another boot) is dropped.
        if let sessionUnlock, keybag.status.lockState == .beforeFirstUnlock, let token = sessionUnlock.read(),
            !keybag.unlock(sessionToken: token)
        {
            sessionUnlock.remove()
        }
    }

    private static func openKeybag(directory: String, options: KeychainOptions) throws -> Keybag {
        let rootPath = options.deviceRootPath ?? PathText.join(directory, "device-root")
        let databasePath = PathText.join(directory, databaseName)
        do {
            // A new root only for a new keychain: a copy of a keychain whose root is missing (kept
            // elsewhere) is refused as it is, with nothing written into it.
            try recoverMigration(directory: directory, rootPath: rootPath, deviceRoots: options.deviceRoots)
            let isNew = SecureFiles.identity(of: PathText.join(directory, "keybag")) == nil
            let root = try options.deviceRoots.openRoot(path: rootPath, create: isNew)
            return try Keybag(
                directory: directory, root: root, clock: options.clock, passcodeFunction: options.passcodeFunction,
                deleteItems: { try deleteAllItems(databasePath: databasePath) })
        } catch {
            throw unavailable("cannot open the keybag: \(describe(error))")
        }
    }

    private static func openDatabase(_ path: String, idleConnections: Int) throws -> ConnectionPool {
        do {
            // Only SQLite opens these files: a descriptor opened and closed on the database anywhere
            // else in this process would drop SQLite's POSIX locks on it, and another process would
            // then fold and delete the log this process still writes to. So the checks here look at
            // the files without opening them, and SQLite alone judges the contents (a file that is
            // not a database, or a damaged one, fails below with SQLite's own codes, left untouched).
            try SecureFiles.createPrivateFile(path)
            try SecureFiles.checkPrivateFile(path + "-wal")
            try SecureFiles.checkPrivateFile(path + "-shm")
            let pool = try ConnectionPool(path: path, create: false, maximumIdle: idleConnections)
            try pool.withConnection { connection in try ItemStore(connection: connection).prepareSchema() }
            return pool
        } catch let error as StorageError where error.kind == .full {
            // Opening writes too (the shared-memory index, the log): a full disk says so.
            throw KeychainError(.diskFull, "the disk is full: cannot open the database \(path): \(error.message)")
        } catch {
            throw unavailable("cannot open the database \(path): \(describe(error))")
        }
    }

    /// Closes the database connections not in use (see `ConnectionPool.closeIdleConnections`). The
    /// keychain stays usable; call this when a process is about to exit, so that it leaves a database
    /// the next process opens without replaying a log.
    public func closeIdleConnections() { pool.closeIdleConnections() }

    // MARK: Lock state and passcode

    /// Lock state, failed attempts and the next allowed attempt.
    public var status: KeybagStatus { keybag.status }

    /// Names the device root (software or TPM, and which), for `show-keychain-info`.
    public var deviceRootSummary: String { keybag.deviceRootSummary }

    /// Unlocks with the passcode (errSecAuthFailed when wrong; errSecInteractionNotAllowed while the
    /// delay after failures runs; errSecIO when the attempt cannot be counted on disk, in which case it
    /// is not checked either). With the erase option on, the tenth failure deletes every item.
    public func unlock(passcode: SecureBytes) throws {
        try passcodeOperation { try keybag.unlock(passcode: passcode) }
    }

    /// Locks: class-A items become unavailable until the next unlock.
    /// Locks: class-A keys leave memory, and an unlock held for the session ends (other processes that
    /// are unlocked stay so until they lock or end; new ones start locked).
    public func lock() {
        keybag.lock()
        sessionUnlock?.remove()
    }

    /// Unlocks with the passcode and holds the unlock for the login session (see `SessionUnlock`): every
    /// embedded process of this user that opens the keychain until it is locked or the machine restarts
    /// starts unlocked. `.notAvailable` when there is no runtime directory to hold it in.
    public func unlockForSession(passcode: SecureBytes) throws {
        guard let sessionUnlock else {
            throw KeychainError.notAvailable(
                "an unlock can be held for the session only by the embedded keychain, with XDG_RUNTIME_DIR set (the daemon's unlock holds for all its clients anyway)"
            )
        }
        // As every passcode check: a tenth failure with the erase on takes the items too.
        var token = Data()
        try passcodeOperation { token = try keybag.unlockForSession(passcode: passcode) }
        try sessionUnlock.write(token)
    }

    /// Asks the user to approve a general-purpose tool's read of secrets, unless they approved the same
    /// `approvalKey` (a tool in a terminal session) within `reuse` (see `AuthenticationBroker`).
    /// `terminal`: the asking person's terminal, which a passcode prompt uses when no graphical session can.
    public func approveToolRequest(approvalKey: String?, reason: String, reuse: Duration, terminal: String? = nil)
        throws
    {
        try authentication.approveToolRequest(
            approvalKey: approvalKey, reason: reason, reuse: reuse, terminal: terminal)
    }

    /// Asks the user for the passcode (the configured prompt program) and unlocks with it: errSecAuthFailed
    /// when no prompt can be shown or the passcode is wrong, errSecUserCanceled when the user cancels.
    /// `terminal`: the asking person's terminal, which a prompt uses when no graphical session can.
    public func unlockByAsking(reason: String, terminal: String? = nil) throws {
        try authentication.unlockByAsking(reason: reason, terminal: terminal)
    }

    /// Forgets the keys a restart forgets: back to "before first unlock" (class D only).
    public func restart() {
        keybag.restart()
        sessionUnlock?.remove()
    }

    /// Sets a passcode (with `current` nil) or changes it.
    ///
    /// `firstPasscodePolicy` decides whether a first passcode (none set before) may be set: the keybag
    /// asks it under its lock, from the keychain's state, not from the shape of the request.
    public func setPasscode(
        _ passcode: SecureBytes, current: SecureBytes?, firstPasscodePolicy: FirstPasscodePolicy = .always
    ) throws {
        try passcodeOperation {
            try keybag.setPasscode(passcode, current: current) {
                guard case .onlyOnAnEmptyKeychain(let othersEmpty) = firstPasscodePolicy else { return }
                guard try isEmpty(), try othersEmpty() else {
                    throw KeychainError.authenticationFailed(
                        "a first passcode can be set only on an empty keychain (no items, no apps); this one needs its directory removed by an administrator"
                    )
                }
            }
        }
        // A session token is bound to the passcode it was made with.
        sessionUnlock?.remove()
    }

    /// Whether a keychain without a passcode may be given one.
    public enum FirstPasscodePolicy: Sendable {
        /// Always: the device's owner sets a passcode whenever they like (embedded, a user's own daemon).
        case always
        /// Only while the keychain holds no item, and `othersEmpty` (whatever else the keychain's owner
        /// keeps, the daemon's app registry) says it holds nothing either: a first passcode proves
        /// nothing about who sets it, so on a keychain with contents it would let anyone who can send
        /// the request claim them (a system daemon's registry trusts the passcode).
        case onlyOnAnEmptyKeychain(othersEmpty: @Sendable () throws -> Bool)
    }

    /// Removes the passcode. Items of `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly` are destroyed:
    /// their class key is gone, and their rows are deleted.
    public func removePasscode(current: SecureBytes) throws {
        try passcodeOperation { try keybag.removePasscode(current: current) }
        sessionUnlock?.remove()
        do {
            _ = try pool.writeTransaction { connection in
                try ItemStore(connection: connection).deleteAll(
                    protectionClass: ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue)
            }
        } catch {
            // The items are already undecryptable; they will be dropped when next met.
            KeychainLog.error("could not delete items of the removed passcode class: \(Self.describe(error))")
        }
    }

    /// Turns on or off the erase after ten consecutive failed passcode attempts.
    public func setEraseAfterFailedAttempts(_ enabled: Bool, passcode: SecureBytes?) throws {
        try passcodeOperation { try keybag.setWipeAfterFailures(enabled, passcode: passcode) }
    }

    // The same with passcodes given as strings. A string cannot be wiped: programs that read a passcode
    // themselves should keep it in `SecureBytes` from the start.

    public func unlock(passcode: String) throws { try unlock(passcode: SecureBytes(copying: passcode.utf8)) }

    public func setPasscode(_ passcode: String, current: String?) throws {
        try setPasscode(SecureBytes(copying: passcode.utf8), current: current.map { SecureBytes(copying: $0.utf8) })
    }

    public func removePasscode(current: String) throws {
        try removePasscode(current: SecureBytes(copying: current.utf8))
    }

    public func setEraseAfterFailedAttempts(_ enabled: Bool, passcode: String?) throws {
        try setEraseAfterFailedAttempts(enabled, passcode: passcode.map { SecureBytes(copying: $0.utf8) })
    }

    /// Runs a keybag operation that checks the passcode. A failure that was the tenth in a row with the
    /// erase option on has already replaced the keybag; the rows go too.
    private func passcodeOperation(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch KeybagError.wipedLeavingItems(let cause) {
            KeychainLog.error("the erase after failed attempts could not delete the items: \(cause)")
            throw KeychainError.authenticationFailed("too many failed passcode attempts: the keychain was erased")
        } catch {
            throw Self.translate(error)
        }
    }

    /// Deletes every item, through a connection of its own: the keybag's erase runs this before it
    /// replaces the keybag, under the keybag's lock.
    private static func deleteAllItems(databasePath: String) throws {
        let connection = try Connection(path: databasePath, create: false)
        try connection.writeTransaction { try ItemStore(connection: connection).deleteAll() }
    }

    /// Writes made and the transactions that committed them since the keychain was opened: more writes
    /// than commits means concurrent writers shared commits (and fsyncs).
    public var writeStatistics: (writes: Int, commits: Int) { pool.writeStatistics }

    /// Whether the keychain holds no item at all (of any group, tombstones included).
    public func isEmpty() throws -> Bool {
        do {
            return try pool.withConnection { try ItemStore(connection: $0).isEmpty() }
        } catch {
            throw Self.translate(error)
        }
    }

    /// A MAC under the device root, for files beside the keychain that the root vouches for (the
    /// daemon's app registry): a copy edited without the root no longer verifies.
    public func authenticationCode(for data: Data) throws -> Data {
        do {
            return try keybag.authenticate(data)
        } catch {
            throw KeychainError.internalError("cannot authenticate with the device root")
        }
    }

    // MARK: Shared helpers

    /// The digests for the current index key (a new one after an erase).
    func digests() throws -> ItemDigests {
        let key = keybag.indexKey
        if let cached = digestCache.withLock({ $0 }), cached.0 === key { return cached.1 }
        do {
            let digests = try ItemDigests(indexKey: key)
            digestCache.withLock { $0 = (key, digests) }
            return digests
        } catch {
            throw KeychainError.internalError("cannot prepare the index key")
        }
    }
}
