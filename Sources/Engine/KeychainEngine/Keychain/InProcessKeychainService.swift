import KeychainCore

/// The engine as a `KeychainService` for one client, in this process: what the embedded `Security`
/// module runs on, and what the daemon will run for each connection.
public struct InProcessKeychainService: KeychainService {
    public let keychain: Keychain
    public let client: ClientIdentity

    public init(keychain: Keychain, client: ClientIdentity) {
        self.keychain = keychain
        self.client = client
    }

    public func perform(_ request: KeychainRequest) throws -> KeychainAnswer {
        switch request {
        case .add(let attributes): return .result(try keychain.add(attributes, client: client))
        case .copyMatching(let query): return .result(try keychain.copyMatching(query, client: client))
        case .update(let query, let attributes):
            try keychain.update(query, attributes: attributes, client: client)
        case .delete(let query): try keychain.delete(query, client: client)
        case .addIdentity(let certificate, let key):
            try keychain.addIdentity(certificate: certificate, key: key, client: client)
        case .status: return .status(keychain.status)
        case .location: return .location(keychain.databasePath)
        case .authenticate(let request):
            return .authentication(try keychain.authentication.authenticate(request, client: client))
        case .invalidateContext(let context): keychain.authentication.invalidate(context, client: client)
        case .generateEnclaveKey(let attributes):
            return .result(try keychain.generateEnclaveKey(attributes, client: client))
        case .useEnclaveKey(let query, let operation):
            return .secret(try keychain.useEnclaveKey(query, operation: operation, client: client))
        }
        return .done
    }

    public func administer(_ request: KeychainAdminRequest) throws -> KeychainAnswer {
        try administer(request, reporting: nil)
    }

    /// A backup or a restore tells `progress` how far it has come, from the engine, as it goes.
    public func administer(_ request: KeychainAdminRequest, progress: @escaping (_ done: Int, _ total: Int) -> Void)
        throws -> KeychainAnswer
    {
        try administer(request, reporting: progress)
    }

    private func administer(_ request: KeychainAdminRequest, reporting progress: ((Int, Int) -> Void)?) throws
        -> KeychainAnswer
    {
        switch request {
        case .lock: keychain.lock()
        case .unlock(let passcode): try keychain.unlock(passcode: passcode)
        case .unlockForSession(let passcode): try keychain.unlockForSession(passcode: passcode)
        case .setPasscode(let new, let current): try keychain.setPasscode(new, current: current)
        case .removePasscode(let current): try keychain.removePasscode(current: current)
        case .setEraseAfterFailedAttempts(let enabled, let passcode):
            try keychain.setEraseAfterFailedAttempts(enabled, passcode: passcode)
        case .biometry(let command): return .biometry(try keychain.authentication.biometry.perform(command))
        case .companion(let command):
            guard let companion = keychain.authentication.companion else {
                throw KeychainError.invalidParameter(
                    "no companion device is simulated here (securityd --companion simulated, or KEYCHAIN_COMPANION=simulated)"
                )
            }
            return .biometry(try companion.perform(command))
        case .restart: keychain.restart()
        case .eraseAllContentAndSettings(let passcode):
            if keychain.status.passcodeSet {
                guard let passcode else {
                    throw KeychainError.authenticationFailed("erasing the keychain needs its passcode")
                }
                try keychain.unlock(passcode: passcode)
            }
            try keychain.eraseAllContentAndSettings()
        case .migrateDeviceRoot(let kind, let passcode):
            _ = try keychain.migrateDeviceRoot(to: kind, passcode: passcode)
        case .createBackup(let file, let password, let passcode):
            if let passcode { try keychain.unlock(passcode: passcode) }
            return .backup(try keychain.createBackup(to: file, password: password, progress: progress))
        case .restoreBackup(let file, let password, let passcode):
            if let passcode { try keychain.unlock(passcode: passcode) }
            return .restore(try keychain.restoreBackup(from: file, password: password, progress: progress))
        case .registerApp, .listApps, .removeApp:
            throw KeychainError.notAvailable(
                "the app registry belongs to the daemon (securityd); the embedded keychain has none")
        case .sync:
            throw KeychainError.notAvailable(
                "sync of the embedded keychain runs in the process that asks (SyncAgent); this request is the daemon's")
        case .setSecretServicePolicy, .importSecrets:
            throw KeychainError.notAvailable(
                "the Secret Service is the daemon's (securityd --secret-service); start it, or set KEYCHAIN_SOCKET")
        }
        return .done
    }
}
