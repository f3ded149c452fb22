import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainDBus
import KeychainEngine
import KeychainKeybag
import KeychainSystem
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
    /// Knows the `security` command by its contents, so that its entries are tools whoever registered them.
    private let commands = CommandRecognition()
    /// System mode: the daemon's claim on its home directory.
    private let systemHomeLock = Mutex<OwnerLock?>(nil)

    /// What a second daemon on one of these keychains is told about this one.
    private var ownerRecord: String { "securityd pid \(getpid()), socket \(configuration.socketPath)" }

    /// Opens the user's keychain at once in user mode (a damaged one fails here, not at the first
    /// client); system mode opens each user's keychain when that user first connects.
    public init(configuration: DaemonConfiguration) throws {
        self.configuration = configuration
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
            if let opened { return opened }
            let tenant: Tenant
            switch configuration.mode {
            case .user:
                tenant = try Tenant(
                    uid: uid, directory: configuration.home, deviceRootPath: configuration.deviceRootPath,
                    pinentryProgram: configuration.pinentryProgram, fprintdBus: fprintdBus,
                    simulatedCompanion: configuration.simulatedCompanion, owner: ownerRecord)
            case .system:
                let directory = ((configuration.home as NSString).appendingPathComponent("users") as NSString)
                    .appendingPathComponent(String(uid))
                tenant = try Tenant(
                    uid: uid, directory: directory, deviceRootPath: nil, pinentryProgram: configuration.pinentryProgram,
                    fprintdBus: fprintdBus, simulatedCompanion: configuration.simulatedCompanion, owner: ownerRecord)
            }
            opened = tenant
            DaemonLog.info("serving the keychain of uid \(uid) in \(tenant.keychain.directory)")
            return tenant
        }
    }

    /// The system bus, when biometry comes from fprintd.
    private var fprintdBus: String? { configuration.useFprintd ? DBusConnection.systemBusAddress : nil }

    /// The keychains opened so far.
    private var openTenants: [Tenant] {
        tenants.withLock { Array($0.values) }.compactMap { $0.tenant.withLock { $0 } }
    }

    /// Answers one request from one connection.
    func handle(_ request: KeychainRequest, from caller: CallerIdentity) -> Result<KeychainAnswer, KeychainError> {
        do {
            let tenant = try tenant(for: caller.peer.uid)
            switch request {
            case .add, .copyMatching, .update, .delete, .generateEnclaveKey, .useEnclaveKey:
                var client: ClientIdentity
                do {
                    let app = try registration(of: caller, in: tenant)
                    let isTool = try isGeneralPurposeTool(app, caller: caller)
                    let needsApproval = Self.needsApproval(request)
                    if isTool, needsApproval {
                        try approveToolRequest(app, caller: caller, in: tenant)
                    }
                    client = app.identity
                    client.contextScope = caller.peer.contextScope
                    // Only the keychain's own permitted apps keep it awake: a refused caller (another
                    // user, an unregistered program) must not hold someone's keychain unlocked, nor may
                    // any process of the user through a general-purpose tool without the user's approval.
                    if !isTool || needsApproval {
                        tenant.lastActivity.store(Self.monotonicNow, ordering: .relaxed)
                    }
                } catch let refusal as KeychainError {
                    if caller.isNewRefusal(refusal.reason) {
                        DaemonLog.warning("pid \(caller.peer.pid) uid \(caller.peer.uid) refused: \(refusal.reason)")
                    }
                    throw refusal
                }
                return .success(
                    try InProcessKeychainService(keychain: tenant.keychain, client: client).perform(request))
            case .setPasscode(let new, let current) where configuration.mode == .system && caller.peer.uid != 0:
                // Whatever the request says about a current passcode, the keybag decides from its own
                // state: with none set, a first one goes only onto an empty keychain. Were it allowed on
                // one that holds items or apps, any process of the user could set one and then pass the
                // registry's passcode check with it.
                let registry = tenant.registry
                try tenant.keychain.setPasscode(
                    new, current: current,
                    firstPasscodePolicy: .onlyOnAnEmptyKeychain { try registry.entries().get().isEmpty })
                DaemonLog.info("\(request.name) by pid \(caller.peer.pid) uid \(caller.peer.uid)")
                return .success(.done)
            case .unlockForSession(let passcode):
                // The daemon's unlock already holds for every client until the keychain locks.
                try tenant.keychain.unlock(passcode: passcode)
                DaemonLog.info("unlock by pid \(caller.peer.pid) uid \(caller.peer.uid)")
                return .success(.done)
            case .status, .lock, .unlock, .setPasscode, .removePasscode, .setEraseAfterFailedAttempts, .location:
                let answer = try InProcessKeychainService(
                    keychain: tenant.keychain, client: ClientIdentity(accessGroups: [])
                )
                .perform(request)
                if request.name != "status" && request.name != "location" {
                    DaemonLog.info("\(request.name) by pid \(caller.peer.pid) uid \(caller.peer.uid)")
                }
                return .success(answer)
            case .authenticate, .invalidateContext, .biometry(.status), .companion(.status):
                // Evaluating asks the daemon's authenticators; it needs no keychain entitlement, and the
                // contexts it leaves are the calling process's alone.
                let client = ClientIdentity(accessGroups: [], contextScope: caller.peer.contextScope)
                return .success(
                    try InProcessKeychainService(keychain: tenant.keychain, client: client).perform(request))
            case .biometry(let command), .companion(let command):
                // The simulated sensor answers for the user: in system mode only root may drive it (or
                // anyone, in development mode), or a process of the user could answer its own prompts.
                if configuration.mode == .system, caller.peer.uid != 0, !configuration.development {
                    throw KeychainError.missingEntitlement(
                        "the simulated biometric sensor of a system daemon is driven by root or in development mode")
                }
                let answer = try InProcessKeychainService(
                    keychain: tenant.keychain, client: ClientIdentity(accessGroups: [])
                ).perform(request)
                if command != .status {
                    DaemonLog.info("\(request.name) \(command) by pid \(caller.peer.pid) uid \(caller.peer.uid)")
                }
                return .success(answer)
            case .listApps:
                return .success(.apps(try tenant.registry.entries().get()))
            case .registerApp(let registration):
                try authorizeRegistryChange(by: caller, in: tenant, passcode: registration.passcode)
                let app = try makeEntry(registration)
                try tenant.registry.register(app)
                DaemonLog.info(
                    "registered \(app.executablePath) as \(app.applicationIdentifier)\(app.trustsPathOnly ? " (development: trusted by path)" : "")\(app.isGeneralPurposeTool ? " (a general-purpose tool: its reads and changes ask the user)" : "") for uid \(tenant.uid), by pid \(caller.peer.pid)"
                )
                return .success(.done)
            case .removeApp(let path, let passcode):
                try authorizeRegistryChange(by: caller, in: tenant, passcode: passcode)
                try tenant.registry.remove(executablePath: path)
                DaemonLog.info("removed \(path) from the registry of uid \(tenant.uid), by pid \(caller.peer.pid)")
                return .success(.done)
            }
        } catch let error as KeychainError {
            return .failure(error)
        } catch {
            return .failure(.internalError("\(error)"))
        }
    }

    /// The largest request a process that is no registered app of its keychain may send (its item
    /// requests are refused anyway): so it cannot make the daemon hold large frames. A registered app
    /// may send the protocol's limit (a 64 MiB secret).
    static let unregisteredFrameLimit = 1 << 20

    /// Whether the caller is a registered app of its uid's keychain (and so may send large frames,
    /// from its keychain's own budget).
    func isRegisteredApp(_ caller: CallerIdentity) -> Bool {
        guard let tenant = try? tenant(for: caller.peer.uid) else { return false }
        return (try? registration(of: caller, in: tenant)) != nil
    }

    /// The registry entry of the caller's executable (its access groups); -34018 when it is not
    /// registered, has changed, or cannot be identified. Nothing the client sent is consulted.
    private func registration(of caller: CallerIdentity, in tenant: Tenant) throws -> AppRegistration {
        let executable = try caller.identified.get()
        let apps = try tenant.registry.entries().mapError { registryError in
            KeychainError.missingEntitlement("the app registry cannot be used: \(registryError.reason)")
        }.get()
        return try executable.registration(in: apps, development: configuration.development).get()
    }

    /// Whether a tool's request needs the user's approval: one that hands out secrets (data, or
    /// references, a key's, from a search; a use of an enclave key) or changes items (adds, updates,
    /// deletes, new enclave keys: a process of the user could otherwise replace or remove another app's
    /// secrets through the tool). Searches for attributes alone reveal no secret and ask nobody.
    static func needsApproval(_ request: KeychainRequest) -> Bool {
        switch request {
        case .copyMatching(let query):
            // Any value at all counts: the parser decides what is true, and asking too often is safe.
            return query["r_Data"] != nil || query["r_Ref"] != nil
        case .useEnclaveKey, .add, .update, .delete, .generateEnclaveKey: return true
        default: return false
        }
    }

    /// Whether the caller's entry is a general-purpose tool: marked so, or known by the daemon itself
    /// whatever the entry says — the `security` command (by its contents) or an interpreter (by name).
    private func isGeneralPurposeTool(_ app: AppRegistration, caller: CallerIdentity) throws -> Bool {
        if app.isGeneralPurposeTool { return true }
        let executable = try caller.identified.get()
        return caller.isKnownTool {
            Self.isInterpreter(executable.path) || commands.isTheSecurityCommand(executable.digest)
        }
    }

    /// A general-purpose tool (the `security` command, an interpreter) runs whatever its user tells it,
    /// so its registration would lend the groups to every process of that user: the user is asked first,
    /// as macOS asks before its `security` tool reads an item another app made.
    private func approveToolRequest(_ app: AppRegistration, caller: CallerIdentity, in tenant: Tenant) throws {
        let digest = app.executableDigest.map { Hex.encode($0) } ?? app.executablePath
        let approvalKey = caller.peer.terminalSession.map { "\(digest)@\($0)" }
        let reason =
            "\(app.executablePath) (pid \(caller.peer.pid)) wants to read or change a secret of \(app.applicationIdentifier)"
        do {
            try tenant.keychain.approveToolRequest(
                approvalKey: approvalKey, reason: reason, reuse: .seconds(app.approvalReuseSeconds ?? 0))
        } catch let refusal as KeychainError {
            DaemonLog.warning(
                "pid \(caller.peer.pid) uid \(caller.peer.uid): \(app.executablePath): request not approved: \(refusal.reason)"
            )
            throw refusal
        }
    }

    /// In user mode the daemon's owner (the only user it serves) changes the registry. In system mode
    /// each uid reaches its own keychain only: root changes its own registry freely, any other user
    /// changes theirs only with the keychain's passcode (checked like an unlock, under the same delays),
    /// so that a process of theirs cannot register itself; a keychain without a passcode cannot have
    /// its registry changed by its user at all.
    private func authorizeRegistryChange(by caller: CallerIdentity, in tenant: Tenant, passcode: SecureBytes?) throws {
        if configuration.mode == .user || caller.peer.uid == 0 { return }
        guard tenant.keychain.status.passcodeSet else {
            throw KeychainError.authenticationFailed(
                "in system mode a registry changes only with the keychain's passcode: set one first (security set-keychain-password), or ask root"
            )
        }
        guard let passcode else {
            throw KeychainError.authenticationFailed("changing the app registry needs the keychain's passcode")
        }
        try tenant.keychain.unlock(passcode: passcode)
    }

    /// Program names that run whatever script they are given: registering one makes every script of the
    /// user that app (its `/proc/<pid>/exe` is the interpreter's), so the daemon refuses unless told.
    static func isInterpreter(_ path: String) -> Bool {
        let name = (path as NSString).lastPathComponent
        let exact: Set<String> = [
            "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "env", "awk", "gawk",
            "mawk", "node", "nodejs", "deno", "bun", "java", "pwsh", "R", "Rscript", "guile", "racket", "sbcl",
            "ocaml", "swift", "tclsh", "wish", "expect", "gdb", "osascript", "jshell", "irb", "ipython",
            "ipython3",
        ]
        if exact.contains(name) || name.hasPrefix("ld-linux") || name.hasPrefix("ld.so") { return true }
        // Versioned names: python3.11, perl5.36, ruby3.1, lua5.4, php8.2, pypy3, tclsh8.6.
        for family in ["python", "pypy", "perl", "ruby", "lua", "luajit", "php", "tclsh", "node"]
        where name.hasPrefix(family) {
            if name.dropFirst(family.count).allSatisfy({ $0.isNumber || $0 == "." }) { return true }
        }
        return false
    }

    /// Where the system's interpreters are installed.
    static let interpreterDirectories = [
        "/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin", "/usr/lib64", "/lib64",
        "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    ]

    /// Whether `path` is one of the system's interpreters under another name: the same file (a hard
    /// link), or a copy (the same contents). A name is no proof: `cp /bin/bash ~/bin/myapp` is bash.
    /// `digest` is the file's, when the caller has it already (else it is computed if a candidate's
    /// size matches).
    static func isCopyOfAnInterpreter(_ path: String, digest: Data? = nil) -> Bool {
        var target = stat()
        guard stat(path, &target) == 0 else { return false }
        var targetDigest = digest
        for directory in interpreterDirectories {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for name in names where isInterpreter(name) {
                let candidate = (directory as NSString).appendingPathComponent(name)
                var info = stat()
                guard stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                if info.st_dev == target.st_dev, info.st_ino == target.st_ino { return true }
                guard info.st_size == target.st_size else { continue }
                if targetDigest == nil { targetDigest = ExecutableDigests.digest(ofFileAt: path) }
                guard let targetDigest, let resolved = realpath(candidate, nil) else { continue }
                let candidatePath = String(cString: resolved)
                free(resolved)
                if ExecutableDigests.digest(ofFileAt: candidatePath) == targetDigest { return true }
            }
        }
        return false
    }

    private func makeEntry(_ request: AppRegistrationRequest) throws -> AppRegistration {
        guard request.executablePath.hasPrefix("/") else {
            throw KeychainError.invalidParameter("the executable must be given by its absolute path")
        }
        guard !request.applicationIdentifier.isEmpty, !request.applicationIdentifier.contains(",") else {
            throw KeychainError.invalidParameter("the application identifier must be a non-empty name without commas")
        }
        guard request.accessGroups.allSatisfy({ !$0.isEmpty }) else {
            throw KeychainError.invalidParameter("an access group is empty")
        }
        guard let resolved = realpath(request.executablePath, nil) else {
            throw KeychainError.invalidParameter("\(request.executablePath) cannot be found")
        }
        let path = String(cString: resolved)
        free(resolved)
        // Hashed once: for the entry, and to know the file as an interpreter or the command by contents.
        let contents = ExecutableDigests.digest(ofFileAt: path)
        let interpreter = Self.isInterpreter(path) || Self.isCopyOfAnInterpreter(path, digest: contents)
        if interpreter, !request.allowInterpreter {
            throw KeychainError.invalidParameter(
                "\(path) is an interpreter: registered, it would make every script of this user that app; register it only with --allow-interpreter (its reads and changes of secrets then ask the user)"
            )
        }
        let asksUser =
            request.generalPurposeTool || interpreter || (contents.map(commands.isTheSecurityCommand) ?? false)
        guard request.approvalReuseSeconds >= 0, request.approvalReuseSeconds <= 86_400 else {
            throw KeychainError.invalidParameter("an approval reuse window is 0 to 86400 seconds")
        }
        if request.trustPathOnly {
            guard configuration.development else {
                throw KeychainError.invalidParameter(
                    "entries trusted by path are for development: start securityd with --development")
            }
            return AppRegistration(
                executablePath: path, executableDigest: nil, applicationIdentifier: request.applicationIdentifier,
                accessGroups: request.accessGroups, asksUser: asksUser,
                approvalReuseSeconds: request.approvalReuseSeconds)
        }
        guard access(path, X_OK) == 0, let digest = contents else {
            throw KeychainError.invalidParameter("\(path) is not an executable file the daemon can read")
        }
        return AppRegistration(
            executablePath: path, executableDigest: digest, applicationIdentifier: request.applicationIdentifier,
            accessGroups: request.accessGroups, asksUser: asksUser, approvalReuseSeconds: request.approvalReuseSeconds)
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
