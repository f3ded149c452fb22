import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainDBus
import KeychainEngine
import KeychainKeybag
import KeychainSystem
import KeychainTPM
import KeychainTPMRoot
import KeychainWire
import Synchronization

/// What the daemon decides: which keychain a connection reaches (by the uid the kernel gives), whether
/// its process may touch items and in which access groups (by the app registry), and who may change
/// the registry. The socket side (`DaemonServer`) only carries frames to and from here.
public final class KeychainDaemon: Sendable {
    public let configuration: DaemonConfiguration
    /// One slot per uid: the map's lock is held only to find a slot, and a keychain is opened under its
    /// slot's lock, so that opening one user's keychain never holds up another user's requests.
    private let tenants = Mutex<[uid_t: TenantSlot]>([:])
    private let ownUID = getuid()
    /// The decisions, one policy each (Policies/).
    let itemAccess: ItemAccessPolicy
    let stateChanges: StateChangePolicy
    /// System mode: the daemon's claim on its home directory.
    private let systemHomeLock = Mutex<OwnerLock?>(nil)
    /// Opens every tenant's device root: one connection to the TPM for all of them (a TPM without a
    /// resource manager serves one client, with three object slots).
    let deviceRoots: TPMDeviceRootProvider

    /// What a second daemon on one of these keychains is told about this one.
    private var ownerRecord: String { "securityd pid \(getpid()), socket \(configuration.socketPath)" }

    /// Opens the user's keychain at once in user mode (a damaged one fails here, not at the first
    /// client); system mode opens each user's keychain when that user first connects.
    public init(configuration: DaemonConfiguration) throws {
        self.configuration = configuration
        itemAccess = ItemAccessPolicy(development: configuration.development, tools: ToolRecognition())
        stateChanges = StateChangePolicy(mode: configuration.mode, development: configuration.development)
        deviceRoots = TPMDeviceRootProvider(
            tpm: try Self.connectTPM(configuration.tpm), lockout: configuration.tpmLockout)
        switch configuration.mode {
        case .user:
            _ = try tenant(for: ownUID)
        case .system:
            let home: String
            do {
                home = try SecureFiles.ensureDirectory(configuration.home)
                _ = try SecureFiles.ensureDirectory((home as NSString).appendingPathComponent("users"))
            } catch {
                throw KeychainError.notAvailable("cannot use the daemon's directory: \(error)")
            }
            // Each user's keychain is claimed when it is opened; the home, for the daemon's life, so
            // that a second system daemon on it stops at once rather than at its first client.
            let lock = try OwnerLock.claim(directory: home, holder: ownerRecord)
            systemHomeLock.withLock { $0 = lock }
        }
    }

    /// The TPM chosen: a TCTI given must work (the daemon does not start without it); the kernel's
    /// resource manager, when it exists and none was given, is used if it answers, and otherwise
    /// new keychains get the software root (logged).
    private static func connectTPM(_ choice: DaemonConfiguration.TPMChoice) throws -> TPM? {
        switch choice {
        case .none:
            return nil
        case .tcti(let tcti):
            do {
                let tpm = try TPM(tcti: tcti)
                DaemonLog.info("device roots of new keychains in the TPM at \(tcti)")
                return tpm
            } catch {
                throw KeychainError.notAvailable("cannot use the TPM at \(tcti): \(error)")
            }
        case .automatic:
            guard access("/dev/tpmrm0", F_OK) == 0 else { return nil }
            do {
                let tpm = try TPM(tcti: "device:/dev/tpmrm0")
                DaemonLog.info("device roots of new keychains in the TPM at /dev/tpmrm0")
                return tpm
            } catch {
                DaemonLog.error("/dev/tpmrm0 exists but cannot be used (\(error)): new keychains get the software root")
                return nil
            }
        }
    }

    /// Whether a process of `uid` may talk to this daemon at all.
    func admits(uid: uid_t) -> Bool {
        configuration.mode == .system || uid == ownUID
    }

    /// The keychain for a uid, opened on first use.
    func tenant(for uid: uid_t) throws -> Tenant {
        let slot = tenants.withLock { tenants in
            if let slot = tenants[uid] { return slot }
            let slot = TenantSlot()
            tenants[uid] = slot
            return slot
        }
        return try slot.tenant.withLock { opened in
            // An object erased or moved to another root serves nothing more: the directory is opened anew.
            if let opened, !opened.keychain.isRetired { return opened }
            let tenant: Tenant
            switch configuration.mode {
            case .user:
                tenant = try Tenant(
                    uid: uid, directory: configuration.home, deviceRootPath: configuration.deviceRootPath,
                    pinentryProgram: configuration.pinentryProgram, fprintdBus: fprintdBus,
                    simulatedCompanion: configuration.simulatedCompanion, deviceRoots: deviceRoots, owner: ownerRecord)
            case .system:
                let directory = ((configuration.home as NSString).appendingPathComponent("users") as NSString)
                    .appendingPathComponent(String(uid))
                tenant = try Tenant(
                    uid: uid, directory: directory, deviceRootPath: nil, pinentryProgram: configuration.pinentryProgram,
                    fprintdBus: fprintdBus, simulatedCompanion: configuration.simulatedCompanion,
                    deviceRoots: deviceRoots,
                    owner: ownerRecord)
            }
            opened = tenant
            DaemonLog.info("serving the keychain of uid \(uid) in \(tenant.keychain.directory)")
            return tenant
        }
    }

    /// "Erase All Content and Settings" of one keychain: its items, keybag and device root (the engine's
    /// erase), and its app registry, as an iPhone's erase removes its apps. The slot is emptied, so the
    /// next request opens the new keychain; requests still running on the old one are refused by it.
    func erase(_ tenant: Tenant) throws(KeychainError) {
        try engine { try tenant.keychain.eraseAllContentAndSettings() }
        let registry = (tenant.keychain.directory as NSString).appendingPathComponent(AppRegistry.fileName)
        guard unlink(registry) == 0 || errno == ENOENT else {
            throw KeychainError.ioError("cannot remove the app registry: \(String(cString: strerror(errno)))")
        }
        emptySlot(of: tenant)
        DaemonLog.info("erased the keychain of uid \(tenant.uid): items, keybag, device root and app registry")
    }

    /// Empties the tenant's slot (after an erase or a move to another root), so that the next request
    /// opens the directory again; requests still running on the old object are refused by it.
    func emptySlot(of tenant: Tenant) {
        if let slot = tenants.withLock({ $0[tenant.uid] }) {
            slot.tenant.withLock { opened in if opened === tenant { opened = nil } }
        }
    }

    /// The system bus, when biometry comes from fprintd.
    private var fprintdBus: String? { configuration.useFprintd ? DBusConnection.systemBusAddress : nil }

    /// The keychains opened so far.
    private var openTenants: [Tenant] {
        tenants.withLock { Array($0.values) }.compactMap { $0.tenant.withLock { $0 } }
    }

    /// Answers one request from one connection; a backup or a restore tells `progress` how far it has
    /// come as it goes.
    func handle(
        _ request: WireRequest, from caller: any PeerIdentity, progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) -> Result<KeychainAnswer, KeychainError> {
        Result { () throws(KeychainError) in
            switch request {
            case .keychain(let request): try perform(request, from: caller)
            case .admin(let request): try administer(request, from: caller, progress: progress)
            }
        }
    }

    /// One request from one caller, decided by the policies and then served by the caller's keychain.
    func perform(_ request: KeychainRequest, from caller: any PeerIdentity) throws(KeychainError) -> KeychainAnswer {
        let tenant = try engine { try self.tenant(for: caller.uid) }
        switch request {
        case .add, .addIdentity, .copyMatching, .update, .delete, .generateEnclaveKey, .useEnclaveKey:
            let grant: ItemAccessPolicy.Grant
            do throws(KeychainError) {
                let registry = try registryEntries(of: tenant)
                grant = try itemAccess.grant(request, from: caller, registry: registry)
                if grant.needsApproval {
                    try approveToolRequest(grant.app, caller: caller, in: tenant, registry: registry)
                }
            } catch {
                if caller.isNewRefusal(error.reason) {
                    DaemonLog.warning("pid \(caller.pid) uid \(caller.uid) refused: \(error.reason)")
                }
                throw error
            }
            // Only the keychain's own permitted apps keep it awake: a refused caller (another user, an
            // unregistered program) must not hold someone's keychain unlocked, nor may any process of
            // the user through a general-purpose tool without the user's approval.
            if grant.keepsAwake { tenant.lastActivity.store(Self.monotonicNow, ordering: .relaxed) }
            let answer = try serve(request, in: tenant, as: grant.client)
            switch request {
            case .add, .update, .delete: tenant.syncRunner.localChange()
            default: break
            }
            return answer
        case .status, .location:
            return try serve(request, in: tenant, as: ClientIdentity(accessGroups: []))
        case .authenticate, .invalidateContext:
            // Evaluating asks the daemon's authenticators; it needs no keychain entitlement, and the
            // contexts it leaves are the calling process's alone.
            return try serve(
                request, in: tenant, as: ClientIdentity(accessGroups: [], contextScope: caller.contextScope))
        }
    }

    /// The engine's answer to a request, as the client `client`.
    func serve(_ request: KeychainRequest, in tenant: Tenant, as client: ClientIdentity) throws(KeychainError)
        -> KeychainAnswer
    {
        try engine { try InProcessKeychainService(keychain: tenant.keychain, client: client).perform(request) }
    }

    /// Runs engine or registry code, whose failures are `KeychainError`s; anything else is a bug, and
    /// says so rather than passing as a refusal.
    func engine<T>(_ body: () throws -> T) throws(KeychainError) -> T { try Self.engine(body) }

    /// The same, for the daemon's parts that hold no daemon (the Secret Service's store).
    static func engine<T>(_ body: () throws -> T) throws(KeychainError) -> T {
        do { return try body() } catch let error as KeychainError { throw error } catch {
            throw KeychainError.internalError("\(error)")
        }
    }

    func registryEntries(of tenant: Tenant) throws(KeychainError) -> [AppRegistration] {
        try tenant.registry.entries().mapError { registryError in
            KeychainError.missingEntitlement("the app registry cannot be used: \(registryError.reason)")
        }.get()
    }

    /// The largest request a process that is no registered app of its keychain may send (its item
    /// requests are refused anyway): so it cannot make the daemon hold large frames. A registered app
    /// may send the protocol's limit (a 64 MiB secret).
    static let unregisteredFrameLimit = 1 << 20

    /// Whether the caller is a registered app of its uid's keychain (and so may send large frames,
    /// from its keychain's own budget).
    func isRegisteredApp(_ caller: any PeerIdentity) -> Bool {
        guard let tenant = try? tenant(for: caller.uid), let registry = try? registryEntries(of: tenant) else {
            return false
        }
        return (try? itemAccess.registration(of: caller, in: registry)) != nil
    }

    /// A general-purpose tool (the `security` command, an interpreter) runs whatever its user tells it,
    /// so its registration would lend the groups to every process of that user: the user is asked first,
    /// as macOS asks before its `security` tool reads an item another app made.
    private func approveToolRequest(
        _ app: AppRegistration, caller: any PeerIdentity, in tenant: Tenant, registry: [AppRegistration]
    ) throws(KeychainError) {
        let subject = ToolApprovalSubject.of(app, in: registry)
        let approvalKey = caller.terminalSession.map { "\(subject)@\($0)" }
        let reason =
            "\(app.executablePath) (pid \(caller.pid)) wants to read or change a secret of \(app.applicationIdentifier)"
        do throws(KeychainError) {
            try engine {
                try tenant.keychain.approveToolRequest(
                    approvalKey: approvalKey, reason: reason, reuse: .seconds(app.approvalReuseSeconds ?? 0),
                    terminal: caller.controllingTerminal)
            }
        } catch {
            DaemonLog.warning(
                "pid \(caller.pid) uid \(caller.uid): \(app.executablePath): request not approved: \(error.reason)")
            throw error
        }
    }

    // MARK: Idle lock and shutdown

    /// Locks each keychain with a passcode that had no item request from one of its permitted apps for
    /// `configuration.idleLock`. Each keychain keeps its own time.
    func lockIfIdle() {
        guard let idle = configuration.idleLock else { return }
        let (seconds, attoseconds) = idle.components
        let limit = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        for tenant in openTenants where tenant.keychain.status.lockState == .unlocked {
            // Read before the clock: a request that lands in between makes `last` later than `now`.
            let last = tenant.lastActivity.load(ordering: .relaxed)
            let now = Self.monotonicNow
            guard now > last, now - last >= limit else { continue }
            tenant.keychain.lock()
            DaemonLog.info("locked the keychain of uid \(tenant.uid) after \(seconds) s without use")
        }
    }

    /// A login session of `uid` locked: that user's keychain locks, as an iPhone's does with its screen
    /// (class A keys leave memory). A keychain without a passcode, or not opened yet, has nothing to lock;
    /// a user-mode daemon ignores other users' sessions.
    func sessionLocked(uid: uid_t, reason: String) {
        guard admits(uid: uid), let slot = tenants.withLock({ $0[uid] }), let tenant = slot.tenant.withLock({ $0 }),
            tenant.keychain.status.lockState == .unlocked
        else { return }
        tenant.keychain.lock()
        DaemonLog.info("locked the keychain of uid \(uid): \(reason)")
    }

    /// Closes the databases on the way out, so the log is folded into them.
    func close() {
        for tenant in openTenants {
            let (writes, commits) = tenant.keychain.writeStatistics
            if writes > 0 {
                DaemonLog.info(
                    "uid \(tenant.uid): \(writes) writes in \(commits) commits (\(String(format: "%.1f", Double(writes) / Double(commits))) per commit)"
                )
            }
            tenant.keychain.closeIdleConnections()
        }
    }

    static var monotonicNow: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
