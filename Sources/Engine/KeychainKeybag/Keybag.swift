import Dispatch
import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainSystem
import Synchronization

/// The keybag: class keys, passcode, lock state.
///
/// Class keys live in memory only while their class is available; locking drops the class-A keys,
/// restarting drops A and C. The file is shared by every process using the keychain directory: changes
/// are read-modify-write cycles under an exclusive file lock, and each operation notices a file that
/// another process replaced. The lock state itself belongs to the process (as an unlock of the
/// embedded keychain lasts for that process); the daemon will hold one for everyone.
public final class Keybag: Sendable {
    public let path: String
    /// The keychain directory, whose own lock orders changes to the keybag between processes.
    private let directory: String
    private let root: any DeviceRoot
    private let clock: any KeychainClock
    private let fixedFunction: PasscodeFunction?
    /// Deletes the items before an erase replaces the keybag (see `erase`).
    private let deleteItems: @Sendable () throws -> Void
    private let state: Mutex<State>

    private struct State {
        var file: KeybagFile
        var identity: FileIdentity?
        var keys: [ProtectionClass: SecureBytes]
        var indexKey: SecureBytes
        /// The keybag's opened secret (nil only while a keybag from before format 3 is upgraded).
        var secret: SecureBytes?
        /// A passcode-protected class has been unwrapped since start (locked, as opposed to before the
        /// first unlock, when the class-A keys are gone again).
        var unlockedOnce: Bool
    }

    /// Opens the keybag at `directory/keybag`, creating a new one (no passcode) if none exists.
    ///
    /// - Parameters:
    ///   - passcodeFunction: a fixed passcode KDF for tests; nil uses `PasscodeFunction.calibrated()` when
    ///     a passcode is set.
    ///   - deleteItems: deletes every item; the erase after ten failures runs it before it replaces the
    ///     keybag.
    public init(
        directory: String, root: any DeviceRoot, clock: any KeychainClock = SystemClock(),
        passcodeFunction: PasscodeFunction? = nil, deleteItems: @escaping @Sendable () throws -> Void = {}
    ) throws {
        path = PathText.join(directory, "keybag")
        self.directory = directory
        self.root = root
        self.clock = clock
        fixedFunction = passcodeFunction
        self.deleteItems = deleteItems
        // The closure may not capture self before every property is set: it works on copies.
        let (path, root, directory) = (path, root, directory)
        let loaded = try SecureFiles.withDirectoryLock(directory) { () throws -> (KeybagFile, FileIdentity?) in
            SecureFiles.removeStaleTemporaries(of: path)
            if let contents = try SecureFiles.read(path) {
                var file = try KeybagFile.decode(contents, root: root)
                if file.isLegacy {
                    // Only the software root ever wrote one: under an anchored root it is a copy put back.
                    guard root.anchor == nil else {
                        throw KeybagError.rolledBack("a keybag from before format 3 cannot belong to this device root")
                    }
                    file = try Keybag.upgrade(file, root: root)
                    try Keybag.write(&file, to: path, root: root)
                } else {
                    try Keybag.checkAnchor(file, root: root)
                }
                return (file, SecureFiles.identity(of: path))
            }
            var file = try Keybag.makeFile(root: root, after: nil)
            try Keybag.write(&file, to: path, root: root)
            return (file, SecureFiles.identity(of: path))
        }
        let file = loaded.0
        let opened = try Keybag.rootWrappedKeys(of: file, root: root)
        state = Mutex(
            State(
                file: file, identity: loaded.1, keys: opened.classKeys, indexKey: opened.indexKey,
                secret: opened.secret, unlockedOnce: false))
    }

    /// Names the device root, for `show-keychain-info`.
    public var deviceRootSummary: String { root.summary }

    /// The device root's hardware for enclave keys, when it has some (a TPM).
    public var enclaveKeyHardware: (any EnclaveKeyHardware)? { root.enclaveKeys }

    // MARK: Keys

    /// The key of searchable digests; available in every state.
    public var indexKey: SecureBytes { state.withLock { $0.indexKey } }

    /// The class key, or why it is not available now. Call `refreshIfChanged()` once per operation first.
    public func classKey(for protectionClass: ProtectionClass) throws -> SecureBytes {
        try state.withLock { state in
            if let key = state.keys[protectionClass] { return key }
            if state.file.classKeys[protectionClass] == nil { throw KeybagError.classUnavailable(protectionClass) }
            throw KeybagError.locked(protectionClass)
        }
    }

    public var status: KeybagStatus {
        try? refreshIfChanged()
        let now = AttemptTime.now(clock)
        return state.withLock { state in
            let remaining = Keybag.remainingDelay(after: state.file, now: now)
            return KeybagStatus(
                lockState: Keybag.lockState(state), failedAttempts: Int(state.file.failedAttempts),
                nextAttemptAllowed: remaining > 0 ? Date(timeIntervalSince1970: now.wall + remaining) : nil,
                wipeAfterFailures: state.file.wipeAfterFailures, deviceRoot: root.summary)
        }
    }

    // MARK: Lock state

    /// Unlocks with the passcode. Wrong passcodes count towards the escalating delays, across restarts
    /// and processes; the tenth in a row erases the keychain when that option is on (`KeybagError.wiped`).
    public func unlock(passcode: SecureBytes) throws { _ = try unlocking(passcode, makingSessionToken: false) }

    /// The one unlock with a passcode, returning a session token when asked for one.
    private func unlocking(_ passcode: SecureBytes, makingSessionToken: Bool) throws -> Data? {
        var token: Data?
        try verifyingPasscode(passcode) { file, passcodeKey in
            try self.openPasscodeClasses(file: file, passcodeKey: passcodeKey)
            if makingSessionToken {
                guard let context = self.sessionContext(file) else { throw KeybagError.noPasscodeSet }
                token = try self.root.wrap(passcodeKey, context: context)
            } else if case .pbkdf2? = file.passcode?.function {
                // A keybag from before scrypt moves to it with the first passcode that opens it (a
                // plain unlock: the move changes the salt, which a session token is bound to).
                try self.rewrap(
                    file: file, currentPasscodeKey: passcodeKey, newPasscode: passcode,
                    function: self.fixedFunction ?? PasscodeFunction.calibrated())
            }
        }
        return token
    }

    // MARK: Session unlock

    /// Unlocks with the passcode, as `unlock(passcode:)`, and returns a session token: the passcode key
    /// wrapped by the device root, bound to this keybag, this passcode (its salt) and this boot, which
    /// `unlock(sessionToken:)` takes instead of the passcode until the next boot. Whoever keeps the token
    /// decides where it lives (the engine keeps it where only the user's session reaches).
    public func unlockForSession(passcode: SecureBytes) throws -> Data {
        guard let token = try unlocking(passcode, makingSessionToken: true) else { throw KeybagError.noPasscodeSet }
        return token
    }

    /// Unlocks with a token `unlockForSession` made in this boot, for this keybag and passcode; false
    /// (and nothing changed, no attempt counted: a token is no guess) when it does not open.
    public func unlock(sessionToken: Data) -> Bool {
        do {
            try refreshIfChanged()
            let file = state.withLock { $0.file }
            guard let context = sessionContext(file) else { return false }
            let passcodeKey = try root.unwrap(sessionToken, context: context)
            try openPasscodeClasses(file: file, passcodeKey: passcodeKey)
            return true
        } catch {
            return false
        }
    }

    /// What a session token is bound to; nil without a passcode.
    private func sessionContext(_ file: KeybagFile) -> Data? {
        guard let parameters = file.passcode else { return nil }
        return Data("swift-keychain session unlock v1".utf8) + file.identifier + parameters.salt
            + clock.sinceBoot().boot
    }

    private func openPasscodeClasses(file: KeybagFile, passcodeKey: SecureBytes) throws {
        try state.withLock { state in
            for (protectionClass, wrapped) in file.classKeys where wrapped.passcodeProtected {
                state.keys[protectionClass] = try Keybag.unwrapWithPasscode(
                    wrapped, protectionClass, file: file, passcodeKey: passcodeKey)
            }
            state.unlockedOnce = true
        }
    }

    /// A MAC under the device root (see `DeviceRoot.authenticate`).
    public func authenticate(_ data: Data) throws -> Data { try root.authenticate(data) }

    /// Wraps a key that must never leave this device (an enclave key's private half) under the
    /// device root, bound to `context`; only this root unwraps it (`unwrapDeviceBound`).
    public func wrapDeviceBound(_ key: SecureBytes, context: Data) throws -> Data {
        try root.wrap(key, context: Data("swift-keychain device-bound key v1".utf8) + context)
    }

    /// Reverses `wrapDeviceBound`; `KeybagError.foreignDevice` when this root did not wrap it for `context`.
    public func unwrapDeviceBound(_ wrapped: Data, context: Data) throws -> SecureBytes {
        try root.unwrap(wrapped, context: Data("swift-keychain device-bound key v1".utf8) + context)
    }

    /// Set by `retire()`: this keybag's file is gone and a new keychain may have written its own.
    private let retired = Atomic<Bool>(false)

    /// Stops this keybag for good, for an erase: it forgets every key and writes nothing more.
    public func retire() {
        retired.store(true, ordering: .releasing)
        state.withLock { state in
            for protectionClass in ProtectionClass.allCases { state.keys[protectionClass] = nil }
            state.unlockedOnce = false
        }
    }

    /// Revokes what the device root keeps for this keychain (see `DeviceRoot.retire`), for an erase.
    public func retireRoot() throws {
        do {
            try root.retire()
        } catch {
            throw KeybagError.deviceRootUnavailable("the device root could not be retired: \(error)")
        }
    }

    /// Frees what the device root kept for this keychain, once its files are gone (for an erase).
    public func releaseRoot() { root.release() }

    /// Locks: class-A keys leave memory. Without a passcode there is nothing to lock.
    public func lock() {
        state.withLock { state in
            guard state.file.passcode != nil else { return }
            for protectionClass in ProtectionClass.allCases where protectionClass.tier == .whenUnlocked {
                state.keys[protectionClass] = nil
            }
        }
    }

    /// Forgets every passcode-protected key, as a reboot does: back to "before first unlock".
    public func restart() {
        state.withLock { state in
            guard state.file.passcode != nil else { return }
            for (protectionClass, wrapped) in state.file.classKeys where wrapped.passcodeProtected {
                state.keys[protectionClass] = nil
            }
            state.unlockedOnce = false
        }
    }

    // MARK: Passcode

    /// Sets a passcode (none set: `current` must be nil) or changes it (`current` is the old one).
    /// Setting one creates the `whenPasscodeSetThisDeviceOnly` class key; the process stays unlocked.
    ///
    /// `firstPasscodeAllowed` decides, when no passcode is set, whether one may be set now: it runs under
    /// the keybag's lock, once the keybag file has confirmed that none is set, whatever `current` says
    /// (a caller-supplied `current` proves nothing while there is no passcode to check it against).
    public func setPasscode(
        _ newPasscode: SecureBytes, current: SecureBytes?, firstPasscodeAllowed: () throws -> Void = {}
    ) throws {
        guard newPasscode.count > 0 else { throw KeybagError.emptyPasscode }
        let function = fixedFunction ?? PasscodeFunction.calibrated()
        let hasPasscode = state.withLock { $0.file.passcode != nil }
        if hasPasscode {
            guard let current, current.count > 0 else { throw KeybagError.passcodeRequired }
            try verifyingPasscode(current) { file, passcodeKey in
                try self.rewrap(
                    file: file, currentPasscodeKey: passcodeKey, newPasscode: newPasscode, function: function)
            }
        } else {
            try SecureFiles.withDirectoryLock(directory) {
                let file = try self.reloadLocked()
                guard file.passcode == nil else { throw KeybagError.passcodeRequired }
                try firstPasscodeAllowed()
                try self.rewrap(file: file, currentPasscodeKey: nil, newPasscode: newPasscode, function: function)
            }
        }
    }

    /// Removes the passcode after checking it. The `whenPasscodeSetThisDeviceOnly` class key is
    /// destroyed, so those items can never be decrypted again; the caller deletes their rows.
    public func removePasscode(current: SecureBytes) throws {
        try verifyingPasscode(current) { file, passcodeKey in
            try self.rewrap(file: file, currentPasscodeKey: passcodeKey, newPasscode: nil, function: nil)
        }
    }

    /// Turns the erase after ten failed attempts on or off (needs the passcode when one is set).
    public func setWipeAfterFailures(_ enabled: Bool, passcode: SecureBytes?) throws {
        let change: (KeybagFile) throws -> Void = { file in
            var file = file
            file.wipeAfterFailures = enabled
            try self.store(file)
        }
        if state.withLock({ $0.file.passcode != nil }) {
            guard let passcode else { throw KeybagError.passcodeRequired }
            try verifyingPasscode(passcode) { file, _ in try change(file) }
        } else {
            try SecureFiles.withDirectoryLock(directory) { try change(try self.reloadLocked()) }
        }
    }

    // MARK: Moving to another root

    /// The class keys before and after a migration (`migrate(to:…)`), for moving every item across.
    public struct Migration: Sendable {
        public let oldKeys: [ProtectionClass: SecureBytes]
        public let newKeys: [ProtectionClass: SecureBytes]
    }

    /// The software root's secret, to hand to the root the keychain moves to; nil when the root is not
    /// the software one (a hardware root never hands its keys out: there is no way back).
    public func rootInheritance() throws -> InheritedDeviceRoot? {
        try (root as? SoftwareDeviceRoot)?.inheritance()
    }

    /// Writes at `stagingPath` this keybag moved to the root `makeTarget` makes (called once the
    /// passcode is proved, under the keybag's lock, so a wrong guess costs the hardware nothing): new class keys (for every class this one
    /// has), the same index key (the database's digests stay valid), the passcode bound to the new root
    /// (checked and counted first, as an unlock: it is needed whenever one is set), the erase option as
    /// it is. Then runs `commit`, still under the keybag's lock, which moves the items to the new keys
    /// and puts the new files in place; once it has, the caller retires this keybag and opens the
    /// directory again. Nothing is changed in this keybag's file but the attempt counted.
    public func migrate(
        passcode: SecureBytes?, stagingPath: String, makeTarget: () throws -> any DeviceRoot,
        commit: (Migration) throws -> Void
    ) throws {
        func move(_ file: KeybagFile, _ passcodeKey: SecureBytes?) throws {
            let target = try makeTarget()
            let (oldKeys, indexKey, oldSecret) = self.state.withLock { ($0.keys, $0.indexKey, $0.secret) }
            var keys: [ProtectionClass: SecureBytes] = [:]
            for (protectionClass, wrapped) in file.classKeys {
                if wrapped.passcodeProtected {
                    guard let passcodeKey else { throw KeybagError.passcodeRequired }
                    keys[protectionClass] = try Keybag.unwrapWithPasscode(
                        wrapped, protectionClass, file: file, passcodeKey: passcodeKey)
                } else {
                    keys[protectionClass] =
                        try oldKeys[protectionClass]
                        ?? Keybag.unwrapUnderKeybag(
                            wrapped.blob, Keybag.classContext(file, protectionClass, passcodeProtected: false),
                            secret: oldSecret, root: self.root)
                }
            }
            var updated = KeybagFile(
                identifier: try Random.bytes(16), deviceIdentifier: target.deviceIdentifier, passcode: nil,
                failedAttempts: 0, lastAttempt: .none, wipeAfterFailures: file.wipeAfterFailures, classKeys: [:],
                indexKey: Data())
            updated.generation = try Keybag.nextGeneration(after: nil, root: target)
            let secret = try SecureBytes(randomCount: AESGCM.keySize, pinned: true)
            updated.keybagSecret = try target.sealKeybagSecret(secret, generation: updated.generation)
            updated.indexKey = try AESGCM.seal(
                indexKey, key: secret, authenticating: KeybagFile.indexKeyContext(keybag: updated.identifier))
            var newPasscodeKey: SecureBytes?
            if let parameters = file.passcode {
                guard let passcode else { throw KeybagError.passcodeRequired }
                var function = parameters.function
                if case .pbkdf2 = function { function = self.fixedFunction ?? PasscodeFunction.calibrated() }
                var moved = KeybagFile.PasscodeParameters(salt: try Random.bytes(16), function: function)
                let bound = try target.bindPasscode(
                    try function.derive(passcode, salt: moved.salt), generation: updated.generation)
                moved.binding = bound.binding
                updated.passcode = moved
                newPasscodeKey = bound.entangled
            }
            var newKeys: [ProtectionClass: SecureBytes] = [:]
            for protectionClass in keys.keys {
                let key = try SecureBytes(randomCount: AESGCM.keySize, pinned: true)
                newKeys[protectionClass] = key
                let protected = protectionClass.isPasscodeProtected && newPasscodeKey != nil
                updated.classKeys[protectionClass] = try Keybag.wrap(
                    key, protectionClass, passcodeKey: protected ? newPasscodeKey : nil, file: updated, secret: secret)
            }
            try Keybag.write(&updated, to: stagingPath, root: target)
            try commit(Migration(oldKeys: keys, newKeys: newKeys))
        }
        if state.withLock({ $0.file.passcode != nil }) {
            guard let passcode, passcode.count > 0 else { throw KeybagError.passcodeRequired }
            try verifyingPasscode(passcode) { file, passcodeKey in try move(file, passcodeKey) }
        } else {
            try SecureFiles.withDirectoryLock(directory) { try move(try self.reloadLocked(), nil) }
        }
    }

    // MARK: Internals

    /// Checks `passcode` under the keybag's lock, applying the delays and counting failures; on success
    /// runs `body` with the current file and the passcode key.
    ///
    /// The attempt is counted on disk (written and fsync'd) before the passcode is derived and checked,
    /// and uncounted only once it proved right. A process killed at any point after it could learn the
    /// answer has paid for the guess; one whose count cannot be written is refused before any check
    /// (fail closed).
    private func verifyingPasscode(_ passcode: SecureBytes, _ body: (KeybagFile, SecureBytes) throws -> Void)
        throws
    {
        try SecureFiles.withDirectoryLock(directory) {
            var file = try reloadLocked()
            guard let parameters = file.passcode else { throw KeybagError.noPasscodeSet }
            // A tenth attempt counted by a process that never finished it.
            if Keybag.isDueForErase(file) { try erase() }
            let now = AttemptTime.now(clock)
            let remaining = Keybag.remainingDelay(after: file, now: now)
            if remaining > 0 {
                if file.lastAttempt.secondsElapsed(until: now) == nil {
                    // A clock reads earlier than the counted attempt: the wait starts over from now.
                    file.lastAttempt = now
                    try record(file)
                }
                throw KeybagError.attemptsThrottled(retryAt: Date(timeIntervalSince1970: now.wall + remaining))
            }
            file.failedAttempts += 1
            file.lastAttempt = now
            try record(file)
            file = state.withLock { $0.file }

            let passcodeKey: SecureBytes
            let probeClass = ProtectionClass.whenUnlocked
            guard let probe = file.classKeys[probeClass] else { throw KeybagError.corrupt("keybag lacks class A") }
            do {
                // A hardware root checks the passcode here, counting a wrong one in the chip.
                passcodeKey = try derivePasscodeKey(passcode, parameters, file: file)
                _ = try Keybag.unwrapWithPasscode(probe, probeClass, file: file, passcodeKey: passcodeKey)
            } catch let error as KeybagError where error.isDeviceRootRefusal {
                // The chip checked nothing (locked out, gone, refusing): the attempt is not one.
                file.failedAttempts -= 1
                try? record(file)
                throw error
            } catch KeybagError.wrongPasscode {
                if Keybag.isDueForErase(file) { try erase() }
                throw KeybagError.wrongPasscode(failedAttempts: Int(file.failedAttempts))
            }
            file.failedAttempts = 0
            try record(file)
            return try body(state.withLock { $0.file }, passcodeKey)
        }
    }

    /// With the erase option on, the count has reached the tenth failure.
    private static func isDueForErase(_ file: KeybagFile) -> Bool {
        file.wipeAfterFailures && file.failedAttempts >= KeybagStatus.failuresBeforeErase
    }

    /// Writes the attempt counter; a failure to write refuses the attempt.
    private func record(_ file: KeybagFile) throws {
        do {
            try store(file)
        } catch let failure as SecureFiles.Failure {
            throw KeybagError.attemptNotRecorded(failure.description)
        }
    }

    /// Erases the keychain: the items first, then the keybag, replaced by a new one (every class key
    /// gone). In that order, a process killed in between leaves no items behind for an earlier keybag
    /// put back to open; the counted tenth attempt still erases the keybag at the next attempt. Items
    /// that cannot be deleted (the database cannot be written) are left undecryptable, and logged by
    /// the caller.
    private func erase() throws -> Never {
        var itemsLeft: (any Error)?
        do { try deleteItems() } catch { itemsLeft = error }
        try store(Keybag.makeFile(root: root, after: state.withLock { $0.file }))
        if let itemsLeft { throw KeybagError.wipedLeavingItems("\(itemsLeft)") }
        throw KeybagError.wiped
    }

    /// Seconds until the next passcode attempt: the schedule's delay less the time both clocks agree has
    /// passed since the last counted attempt; the whole delay when a clock reads earlier than that
    /// attempt. Never more than the schedule's delay.
    static func remainingDelay(after file: KeybagFile, now: AttemptTime) -> TimeInterval {
        let delay = PasscodePolicy.delay(afterFailures: Int(file.failedAttempts))
        guard delay > 0 else { return 0 }
        guard let elapsed = file.lastAttempt.secondsElapsed(until: now) else { return delay }
        return max(0, delay - elapsed)
    }

    /// Re-wraps every class key for a new passcode (or none), keeping the keys themselves, so no item
    /// needs re-encrypting. Must hold the file lock, with every class key unwrappable.
    ///
    /// The keybag moves to a new generation with a new secret: once it is written, a root with an
    /// anchor revokes the old generation, so a copy of the old keybag opens nothing with the old
    /// passcode (or with none).
    private func rewrap(
        file: KeybagFile, currentPasscodeKey: SecureBytes?, newPasscode: SecureBytes?, function: PasscodeFunction?
    ) throws {
        let currentSecret = state.withLock { $0.secret }
        var keys: [ProtectionClass: SecureBytes] = [:]
        for (protectionClass, wrapped) in file.classKeys {
            if wrapped.passcodeProtected {
                guard let currentPasscodeKey else { throw KeybagError.passcodeRequired }
                keys[protectionClass] = try Keybag.unwrapWithPasscode(
                    wrapped, protectionClass, file: file, passcodeKey: currentPasscodeKey)
            } else {
                keys[protectionClass] = try Keybag.unwrapUnderKeybag(
                    wrapped.blob, Keybag.classContext(file, protectionClass, passcodeProtected: false),
                    secret: currentSecret, root: root)
            }
        }
        let indexKey = state.withLock { $0.indexKey }
        var updated = file
        updated.classKeys = [:]
        updated.generation = try Keybag.nextGeneration(after: file, root: root)
        let secret = try SecureBytes(randomCount: AESGCM.keySize, pinned: true)
        updated.keybagSecret = try root.sealKeybagSecret(secret, generation: updated.generation)
        updated.indexKey = try AESGCM.seal(
            indexKey, key: secret, authenticating: KeybagFile.indexKeyContext(keybag: updated.identifier))
        var passcodeKey: SecureBytes?
        if let newPasscode, let function {
            var parameters = KeybagFile.PasscodeParameters(salt: try Random.bytes(16), function: function)
            if keys[.whenPasscodeSetThisDeviceOnly] == nil {
                keys[.whenPasscodeSetThisDeviceOnly] = try SecureBytes(randomCount: AESGCM.keySize, pinned: true)
            }
            let stretched = try function.derive(newPasscode, salt: parameters.salt)
            let bound = try root.bindPasscode(stretched, generation: updated.generation)
            parameters.binding = bound.binding
            updated.passcode = parameters
            passcodeKey = bound.entangled
        } else {
            updated.passcode = nil
            keys[.whenPasscodeSetThisDeviceOnly] = nil
        }
        for (protectionClass, key) in keys {
            let protected = protectionClass.isPasscodeProtected && passcodeKey != nil
            updated.classKeys[protectionClass] = try Keybag.wrap(
                key, protectionClass, passcodeKey: protected ? passcodeKey : nil, file: updated, secret: secret)
        }
        updated.failedAttempts = 0
        try store(updated, secret: secret)
        state.withLock { state in
            state.keys = keys
            state.unlockedOnce = newPasscode != nil
        }
    }

    /// Re-reads the file if another process replaced it. A keybag with a new identifier (erased and
    /// recreated) invalidates every key held; otherwise keys stay valid, because re-wrapping for a
    /// passcode change never changes the class keys themselves.
    ///
    /// - Parameter maximumAge: skip the check when the last one is younger than this many seconds. A
    ///   change another process makes within that window is seen as if it had happened just after this
    ///   operation, which no caller can tell apart; it saves a `stat` on every call of a busy client.
    public func refreshIfChanged(maximumAge: TimeInterval = 0) throws {
        let now = DispatchTime.now().uptimeNanoseconds
        if maximumAge > 0 {
            let last = lastCheck.withLock { $0 }
            if last != 0, now &- last < UInt64(maximumAge * 1e9) { return }
        }
        let identity = SecureFiles.identity(of: path)
        lastCheck.withLock { $0 = now }
        guard identity != state.withLock({ $0.identity }) else { return }
        _ = try SecureFiles.withDirectoryLock(directory) { try reloadLocked() }
    }

    /// When the file was last compared with what is in memory (monotonic nanoseconds; 0: never).
    private let lastCheck = Mutex<UInt64>(0)

    /// Reads the file into memory; the caller holds the file lock.
    private func reloadLocked() throws -> KeybagFile {
        guard let contents = try SecureFiles.read(path) else {
            throw KeybagError.io("keybag \(path) has disappeared")
        }
        let file = try KeybagFile.decode(contents, root: root)
        try Keybag.checkAnchor(file, root: root)
        let identity = SecureFiles.identity(of: path)
        let opened = try Keybag.rootWrappedKeys(of: file, root: root)
        let (indexKey, rootKeys) = (opened.indexKey, opened.classKeys)
        state.withLock { state in
            if state.file.identifier != file.identifier {
                state.keys = [:]
                state.unlockedOnce = false
            }
            for protectionClass in ProtectionClass.allCases where file.classKeys[protectionClass] == nil {
                state.keys[protectionClass] = nil
            }
            state.keys.merge(rootKeys) { _, fresh in fresh }
            state.file = file
            state.identity = identity
            state.indexKey = indexKey
            state.secret = opened.secret
        }
        return file
    }

    /// Writes the file; the caller holds the file lock. `secret` is the keybag's secret when the file
    /// has a new one (a new generation).
    private func store(_ file: KeybagFile, secret: SecureBytes? = nil) throws {
        // A retired keybag (its keychain erased) writes nothing more: an unlock still running on it
        // must not put the old keybag back over the new keychain's.
        if retired.load(ordering: .acquiring) { throw KeybagError.io("the keychain was erased") }
        var file = file
        try Keybag.write(&file, to: path, root: root)
        let identity = SecureFiles.identity(of: path)
        let newBag = state.withLock { $0.file.identifier != file.identifier }
        if newBag {
            // Erased: nothing held is valid any more; load the new root-wrapped keys.
            let opened = try Keybag.rootWrappedKeys(of: file, root: root)
            state.withLock { state in
                state = State(
                    file: file, identity: identity, keys: opened.classKeys, indexKey: opened.indexKey,
                    secret: opened.secret, unlockedOnce: false)
            }
        } else {
            state.withLock { state in
                state.file = file
                state.identity = identity
                if let secret { state.secret = secret }
            }
        }
    }

    /// Writes `file` with the next write count, then commits that count (and a new generation) to the
    /// root's anchor. Killed in between, the file is one ahead of the anchor, which the next open
    /// accepts and commits (`checkAnchor`); an older file is refused.
    private static func write(_ file: inout KeybagFile, to path: String, root: any DeviceRoot) throws {
        let anchor = root.anchor
        // Wrapping: a counter at its very end (another program's index) is refused as a mismatch, not a trap.
        file.writeCount = try (anchor?.writes() ?? file.writeCount) &+ 1
        try SecureFiles.writeAtomically(try file.encoded(root: root), to: path)
        guard let anchor else { return }
        try anchor.advanceWrites(to: file.writeCount)
        if try file.generation == anchor.generation() &+ 1 { try anchor.advanceGeneration(to: file.generation) }
    }

    /// Refuses a keybag older than the root's anchor (a copy put back), and finishes a write that was
    /// cut short after the file and before the anchor.
    static func checkAnchor(_ file: KeybagFile, root: any DeviceRoot) throws {
        guard let anchor = root.anchor else { return }
        try reconcile(file.writeCount, with: anchor.writes(), "the keybag records write", anchor.advanceWrites)
        try reconcile(
            file.generation, with: anchor.generation(), "the keybag is of generation", anchor.advanceGeneration)
    }

    /// One counter of the anchor against the file's: equal, or one behind (moved on now), or refused.
    private static func reconcile(
        _ recorded: UInt64, with counter: UInt64, _ what: String, _ advance: (UInt64) throws -> Void
    ) throws {
        if recorded == counter { return }
        guard recorded != counter &+ 1 else { return try advance(recorded) }
        throw KeybagError.rolledBack(
            "\(what) \(recorded) but the device root's counter is at \(counter): "
                + (recorded < counter ? "an older copy was put back" : "the counter was replaced"))
    }

    /// The generation a keybag written after `file` takes.
    private static func nextGeneration(after file: KeybagFile?, root: any DeviceRoot) throws -> UInt64 {
        try (root.anchor?.generation() ?? file?.generation ?? 0) &+ 1
    }

    /// A keybag from before format 3 under a new secret: the keys the root wrapped directly are
    /// wrapped by the secret instead; the passcode's wrapping is unchanged.
    static func upgrade(_ file: KeybagFile, root: any DeviceRoot) throws -> KeybagFile {
        let opened = try rootWrappedKeys(of: file, root: root)
        var updated = file
        updated.generation = try nextGeneration(after: file, root: root)
        let secret = try SecureBytes(randomCount: AESGCM.keySize)
        updated.keybagSecret = try root.sealKeybagSecret(secret, generation: updated.generation)
        updated.indexKey = try AESGCM.seal(
            opened.indexKey, key: secret, authenticating: KeybagFile.indexKeyContext(keybag: file.identifier))
        for (protectionClass, key) in opened.classKeys {
            updated.classKeys[protectionClass] = try wrap(
                key, protectionClass, passcodeKey: nil, file: updated, secret: secret)
        }
        return updated
    }

    /// The keys the device root alone opens: the keybag's secret, and under it the index key and every
    /// class key not under the passcode.
    private static func rootWrappedKeys(of file: KeybagFile, root: any DeviceRoot) throws
        -> (secret: SecureBytes?, indexKey: SecureBytes, classKeys: [ProtectionClass: SecureBytes])
    {
        let secret =
            file.isLegacy
            ? nil : try root.openKeybagSecret(file.keybagSecret, generation: file.generation).pinnedCopy()
        let indexKey = try unwrapUnderKeybag(
            file.indexKey, KeybagFile.indexKeyContext(keybag: file.identifier), secret: secret, root: root
        ).pinnedCopy()
        var keys: [ProtectionClass: SecureBytes] = [:]
        for (protectionClass, wrapped) in file.classKeys where !wrapped.passcodeProtected {
            keys[protectionClass] = try unwrapUnderKeybag(
                wrapped.blob, classContext(file, protectionClass, passcodeProtected: false), secret: secret,
                root: root
            ).pinnedCopy()
        }
        return (secret, indexKey, keys)
    }

    private func derivePasscodeKey(
        _ passcode: SecureBytes, _ parameters: KeybagFile.PasscodeParameters, file: KeybagFile
    ) throws -> SecureBytes {
        try root.entangle(
            parameters.function.derive(passcode, salt: parameters.salt), binding: parameters.binding,
            generation: file.generation)
    }

    private static func lockState(_ state: State) -> LockState {
        guard state.file.passcode != nil else { return .noPasscode }
        if state.keys[.whenUnlocked] != nil { return .unlocked }
        return state.unlockedOnce ? .locked : .beforeFirstUnlock
    }

    /// A fresh keybag of the generation after `previous` (or the first): new random class keys (none
    /// for the passcode-only class) under a new secret, no passcode.
    static func makeFile(root: any DeviceRoot, after previous: KeybagFile?) throws -> KeybagFile {
        var file = KeybagFile(
            identifier: try Random.bytes(16), deviceIdentifier: root.deviceIdentifier, passcode: nil,
            failedAttempts: 0, lastAttempt: .none, wipeAfterFailures: false, classKeys: [:], indexKey: Data())
        file.generation = try nextGeneration(after: previous, root: root)
        file.writeCount = previous?.writeCount ?? 0
        let secret = try SecureBytes(randomCount: AESGCM.keySize)
        file.keybagSecret = try root.sealKeybagSecret(secret, generation: file.generation)
        for protectionClass in ProtectionClass.allCases where !protectionClass.requiresPasscode {
            let key = try SecureBytes(randomCount: AESGCM.keySize)
            file.classKeys[protectionClass] = try wrap(
                key, protectionClass, passcodeKey: nil, file: file, secret: secret)
        }
        file.indexKey = try AESGCM.seal(
            SecureBytes(randomCount: 32), key: secret,
            authenticating: KeybagFile.indexKeyContext(keybag: file.identifier))
        return file
    }

    static func classContext(_ file: KeybagFile, _ protectionClass: ProtectionClass, passcodeProtected: Bool)
        -> Data
    {
        KeybagFile.context(
            keybag: file.identifier, protectionClass: protectionClass, passcodeProtected: passcodeProtected)
    }

    /// Wraps a class key under the passcode key, or else under the keybag's secret.
    private static func wrap(
        _ key: SecureBytes, _ protectionClass: ProtectionClass, passcodeKey: SecureBytes?, file: KeybagFile,
        secret: SecureBytes
    ) throws -> KeybagFile.WrappedClassKey {
        let context = classContext(file, protectionClass, passcodeProtected: passcodeKey != nil)
        return .init(
            passcodeProtected: passcodeKey != nil,
            blob: try AESGCM.seal(key, key: passcodeKey ?? secret, authenticating: context))
    }

    /// Opens a key the keybag's secret wraps (or, in a keybag from before format 3, the root itself).
    private static func unwrapUnderKeybag(
        _ blob: Data, _ context: Data, secret: SecureBytes?, root: any DeviceRoot
    ) throws -> SecureBytes {
        guard let secret else { return try root.unwrap(blob, context: context) }
        do {
            return try AESGCM.openSecure(blob, key: secret, authenticating: context)
        } catch CryptoError.authenticationFailed, CryptoError.malformedCiphertext {
            throw KeybagError.corrupt("a key in the keybag does not open under the keybag's secret")
        }
    }

    private static func unwrapWithPasscode(
        _ wrapped: KeybagFile.WrappedClassKey, _ protectionClass: ProtectionClass, file: KeybagFile,
        passcodeKey: SecureBytes
    ) throws -> SecureBytes {
        let context = KeybagFile.context(
            keybag: file.identifier, protectionClass: protectionClass, passcodeProtected: true)
        do {
            return try AESGCM.openSecure(wrapped.blob, key: passcodeKey, authenticating: context).pinnedCopy()
        } catch CryptoError.authenticationFailed {
            throw KeybagError.wrongPasscode(failedAttempts: 0)
        }
    }
}
