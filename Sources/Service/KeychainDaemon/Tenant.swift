import Foundation
import KeychainAuthenticators
import KeychainCore
import KeychainEngine
import KeychainKeybag
import KeychainSyncAgent
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One keychain the daemon serves and the apps registered for it: the only one in user mode, one per
/// client uid in system mode.
final class Tenant: Sendable {
    let uid: uid_t
    let keychain: Keychain
    let registry: AppRegistry
    /// The Secret Service's policy, answers and collections (one object, shared by the bus server and
    /// the controls that change the policy).
    let secretService: SecretServiceState
    /// When one of this keychain's permitted apps last made an item request (CLOCK_MONOTONIC
    /// nanoseconds), for the idle lock; opening counts as activity.
    let lastActivity = Atomic<UInt64>(KeychainDaemon.monotonicNow)
    /// Sync of this keychain's synchronizable items (`security sync`), and its background runs.
    let syncAgent: SyncAgent
    let syncRunner: SyncRunner

    init(
        uid: uid_t, directory: String, deviceRootPath: String?, pinentryProgram: String?, fprintdBus: String?,
        simulatedCompanion: Bool, deviceRoots: any DeviceRootProvider, owner: String
    ) throws {
        self.uid = uid
        var fprintd: (bus: String, username: String)?
        if let fprintdBus {
            guard let user = KeychainLocations.userName(of: uid) else {
                throw KeychainError.notAvailable("uid \(uid) has no user name for fprintd")
            }
            fprintd = (fprintdBus, user)
        }
        var options = KeychainOptions.standard(
            deviceRootPath: deviceRootPath, pinentryProgram: pinentryProgram, fprintd: fprintd,
            simulatedCompanion: simulatedCompanion, idleConnections: 64)
        options.owner = .daemon(holder: owner)
        options.deviceRoots = deviceRoots
        keychain = try Keychain(directory: directory, options: options)
        let keychain = keychain
        registry = AppRegistry(directory: keychain.directory) { try keychain.authenticationCode(for: $0) }
        secretService = SecretServiceState(directory: keychain.directory) { try keychain.authenticationCode(for: $0) }
        syncAgent = SyncAgent(keychain: keychain)
        syncRunner = SyncRunner(agent: syncAgent)
        // An enrolled keychain syncs from the start.
        if syncAgent.isEnrolled() { syncRunner.wake() }
    }
}

/// Where a uid's tenant is opened, once, under a lock of its own.
final class TenantSlot: Sendable {
    let tenant = Mutex<Tenant?>(nil)
}
