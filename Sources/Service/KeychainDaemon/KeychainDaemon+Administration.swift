import Foundation
import KeychainBytes
import KeychainCore
import KeychainEngine

// The controls (`KeychainAdminRequest`): each decided by `StateChangePolicy` for the caller, then
// carried out on the caller's own keychain or its registry.
extension KeychainDaemon {
    /// One control from one caller; a backup or a restore tells `progress` how far it has come.
    func administer(
        _ request: KeychainAdminRequest, from caller: any PeerIdentity,
        progress: ((_ done: Int, _ total: Int) -> Void)? = nil
    ) throws(KeychainError) -> KeychainAnswer {
        let tenant = try engine { try self.tenant(for: caller.uid) }
        let requirement = try stateChanges.requirement(
            for: request, by: caller, passcodeSet: tenant.keychain.status.passcodeSet)
        let answer: KeychainAnswer
        switch request {
        case .setPasscode(let new, let current) where requirement == .firstPasscodeOnlyOnAnEmptyKeychain:
            let registry = tenant.registry
            try engine {
                try tenant.keychain.setPasscode(
                    new, current: current,
                    firstPasscodePolicy: .onlyOnAnEmptyKeychain { try registry.entries().get().isEmpty })
            }
            answer = .done
        case .unlockForSession(let passcode):
            // The daemon's unlock already holds for every client until the keychain locks.
            try engine { try tenant.keychain.unlock(passcode: passcode) }
            answer = .done
        case .eraseAllContentAndSettings(let passcode):
            try checkPasscode(passcode, if: requirement, in: tenant)
            try erase(tenant)
            answer = .done
        case .migrateDeviceRoot(let kind, let passcode):
            // The engine checks the passcode itself (counted like an unlock) whenever one is set.
            // Emptied even when the move failed past its point of no return: the next open finishes it.
            defer { if tenant.keychain.isRetired { emptySlot(of: tenant) } }
            let moved = try engine { try tenant.keychain.migrateDeviceRoot(to: kind, passcode: passcode) }
            DaemonLog.info(
                "moved the keychain of uid \(tenant.uid) to a \(kind.name) device root, by pid \(caller.pid): \(moved.movedItems) items moved, \(moved.unreadableItems) unreadable ones left as they were"
            )
            return .done
        case .lock, .unlock, .setPasscode, .removePasscode, .setEraseAfterFailedAttempts, .biometry, .companion,
            .restart:
            answer = try engine {
                try InProcessKeychainService(keychain: tenant.keychain, client: ClientIdentity(accessGroups: []))
                    .administer(request)
            }
        case .listApps:
            return .apps(try registryEntries(of: tenant))
        case .sync(let verb, let arguments, let secret, let passcode):
            try checkPasscode(passcode, if: requirement, in: tenant)
            let result = tenant.syncAgent.perform(verb: verb, arguments: arguments, secret: secret)
            if KeychainAdminRequest.syncVerbsDecidedAsABackup.contains(verb) {
                DaemonLog.info("sync \(verb) for uid \(tenant.uid), by pid \(caller.pid)")
            }
            // An enrolled keychain syncs in the background from now on.
            if tenant.syncAgent.isEnrolled() { tenant.syncRunner.wake() }
            return .syncResult(result)
        case .importSecrets(let source, let secrets, let passcode):
            try checkPasscode(passcode, if: requirement, in: tenant)
            let report = try SecretServiceImport(daemon: self, tenant: tenant).store(secrets)
            DaemonLog.info(
                "imported \(report.imported) secrets from \(source) for uid \(tenant.uid), by pid \(caller.pid); \(report.skipped.values.reduce(0, +)) left out"
            )
            return .imported(report)
        case .setSecretServicePolicy(let policy, let passcode):
            try checkPasscode(passcode, if: requirement, in: tenant)
            try engine { try tenant.secretService.change { $0.policy = policy } }
            DaemonLog.info(
                "the Secret Service policy of uid \(tenant.uid) is now \(policy.rawValue), set by pid \(caller.pid)")
            return .done
        case .registerApp(let registration):
            try checkPasscode(registration.passcode, if: requirement, in: tenant)
            let app = try engine { try makeEntry(registration) }
            try engine { try tenant.registry.register(app) }
            DaemonLog.info(
                "registered \(app.executablePath) as \(app.applicationIdentifier)\(app.trustsPathOnly ? " (development: trusted by path)" : "")\(app.isGeneralPurposeTool ? " (a general-purpose tool: its reads and changes ask the user)" : "") for uid \(tenant.uid), by pid \(caller.pid)"
            )
            return .done
        case .createBackup(let file, let password, let passcode):
            try checkPasscode(passcode, if: requirement, in: tenant)
            let summary = try engine {
                try tenant.keychain.createBackup(to: try absolute(file), password: password, progress: progress)
            }
            DaemonLog.info("backup of uid \(tenant.uid) written by pid \(caller.pid): \(summary.itemCount) items")
            return .backup(summary)
        case .restoreBackup(let file, let password, let passcode):
            try checkPasscode(passcode, if: requirement, in: tenant)
            let report = try engine {
                try tenant.keychain.restoreBackup(from: try absolute(file), password: password, progress: progress)
            }
            DaemonLog.info(
                "backup restored into the keychain of uid \(tenant.uid) by pid \(caller.pid): \(report.restored) items")
            return .restore(report)
        case .removeApp(let path, let passcode, let deletingItems):
            try checkPasscode(passcode, if: requirement, in: tenant)
            let before = try registryEntries(of: tenant)
            try engine { try tenant.registry.remove(executablePath: path) }
            DaemonLog.info("removed \(path) from the registry of uid \(tenant.uid), by pid \(caller.pid)")
            if deletingItems {
                // The groups the removed entry granted that no remaining entry grants: their items go.
                let removed = Set(before.filter { $0.executablePath == path }.flatMap { $0.identity.accessGroups })
                let kept = Set(try registryEntries(of: tenant).flatMap { $0.identity.accessGroups })
                let groups = removed.subtracting(kept).sorted()
                try engine { try deleteItems(inGroups: groups, of: tenant) }
                DaemonLog.info(
                    "deleted the items of \(groups.count) access groups left without an app, uid \(tenant.uid)")
            }
            return .done
        }
        switch request {
        case .biometry(.status), .companion(.status): break
        case .biometry(let command), .companion(let command):
            DaemonLog.info("\(request.name) \(command) by pid \(caller.pid) uid \(caller.uid)")
        case .unlockForSession:
            // Served as an unlock (it holds for every client anyway), and logged as one.
            DaemonLog.info("unlock by pid \(caller.pid) uid \(caller.uid)")
        default: DaemonLog.info("\(request.name) by pid \(caller.pid) uid \(caller.uid)")
        }
        return answer
    }

    /// Every item of these access groups, in every class, synchronizable or not (leaving the tombstones
    /// a synchronizable item's deletion leaves).
    private func deleteItems(inGroups groups: [String], of tenant: Tenant) throws {
        for group in groups {
            let client = ClientIdentity(accessGroups: [group])
            for itemClass in ["genp", "inet", "cert", "keys"] {
                do {
                    try tenant.keychain.delete(
                        ["class": .string(itemClass), "agrp": .string(group), "sync": .string("syna")], client: client)
                } catch let error as KeychainError where error.code == .itemNotFound {}
            }
        }
    }

    /// A file the caller names: by an absolute path, since the daemon does not share its directory, or
    /// by the descriptor it passed (which the server put in).
    private func absolute(_ file: BackupFile) throws -> BackupFile {
        switch file {
        case .path(let path):
            guard path.hasPrefix("/") else {
                throw KeychainError.invalidParameter("the daemon takes a backup file by its absolute path")
            }
            return file
        case .descriptor(let descriptor):
            guard descriptor >= 0 else {
                throw KeychainError.invalidParameter("the backup file's descriptor did not come with the request")
            }
            return file
        }
    }

    /// The passcode a control carries, checked like an unlock when the policy asks for it.
    private func checkPasscode(
        _ passcode: SecureBytes?, if requirement: StateChangePolicy.Requirement, in tenant: Tenant
    )
        throws(KeychainError)
    {
        guard requirement == .passcodeCheck else { return }
        guard let passcode else { throw KeychainError.authenticationFailed("the keychain's passcode is needed") }
        try engine { try tenant.keychain.unlock(passcode: passcode) }
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
        let interpreter =
            ToolRecognition.isInterpreter(path) || ToolRecognition.isCopyOfAnInterpreter(path, digest: contents)
        if interpreter, !request.allowInterpreter {
            throw KeychainError.invalidParameter(
                "\(path) is an interpreter: registered, it would make every script of this user that app; register it only with --allow-interpreter (its reads and changes of secrets then ask the user)"
            )
        }
        let asksUser =
            request.generalPurposeTool || interpreter
            || (contents.map(itemAccess.tools.commands.isTheSecurityCommand) ?? false)
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
}
