import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainKeybag
import KeychainSystem
import KeychainTPM
import Synchronization

/// The device root in a TPM 2.0: the Secure Enclave's part, played by the chip.
///
/// - The root secret is a data object sealed under the TPM's storage primary (`fixedTPM | fixedParent`)
///   for an epoch counter's value: the root file holds only the sealed blob, which no other TPM (and
///   this one after a clear) opens, and which an erase (moving the epoch on) kills.
/// - The keybag's secret is sealed with a policy on an NV counter (the generation): a passcode change
///   or an erase moves the counter on, and the old secret, with every old keybag copy, is dead.
/// - A passcode is the authorization of a dictionary-attack-protected object sealed for the same
///   generation: the chip checks each guess and counts the wrong ones (`TPMLockoutPolicy`).
/// - A second NV counter counts keybag writes, so a keybag put back (its failed attempts reset) is
///   refused (`KeybagAnchor`).
public final class TPMDeviceRoot: DeviceRoot {
    public let deviceIdentifier: Data
    /// The TPM and its guess limit as they are now (read again after five seconds): the lockout
    /// authorization may be set, or the chip locked out, after the keychain opened.
    public var summary: String {
        summaryCache.withLock { cache in
            if let cache, cache.made.timeIntervalSinceNow > -5 { return cache.text }
            let lockout = (try? tpm.lockoutState()).map { state in
                "; guess limit \(state.maxTries) tries, one more every \(state.recoveryTime) s"
                    + (state.inLockout ? "; in lockout now (\(state.failures) failures counted)" : "")
                    + (state.lockoutAuthorizationSet
                        ? "" : "; no lockout authorization: anyone who can send TPM commands can reset the limit")
                    + (state.ownerAuthorizationSet
                        ? "; an owner authorization is set: new counters cannot be made" : "")
            }
            let text =
                "TPM 2.0 (\(tpm.tcti))\(identity)\(lockout ?? "")"
                + (inheritedKeys == nil ? "" : "; moved from the software root")
            cache = (Date(), text)
            return text
        }
    }
    private let identity: String
    private let summaryCache = Mutex<(made: Date, text: String)?>(nil)
    public let anchor: (any KeybagAnchor)?
    private let tpm: TPM
    private let file: TPMRootFile
    private let keys: DeviceRootKeys
    /// The keys of the software root this one took over: what that root wrapped still opens, and the
    /// MAC of files beside the keychain stays the same. Nothing new is wrapped with them.
    private let inheritedKeys: DeviceRootKeys?
    private let counterAuthorization: SecureBytes

    private init(tpm: TPM, file: TPMRootFile, rootSecret: SecureBytes, inheritedSecret: SecureBytes?) throws {
        self.tpm = tpm
        self.file = file
        deviceIdentifier = file.deviceIdentifier
        identity = (try? tpm.identity()).map { " \($0.manufacturer) \($0.vendor), firmware \($0.firmware)" } ?? ""
        let counterAuthorization = try Self.counterAuthorization(rootSecret)
        self.counterAuthorization = counterAuthorization
        anchor = TPMCounters(
            tpm: tpm, generationHandle: file.generationCounter, writesHandle: file.writesCounter,
            authorization: counterAuthorization)
        keys = try DeviceRootKeys(
            secret: rootSecret, deviceIdentifier: file.deviceIdentifier, label: "swift-keychain tpm root")
        inheritedKeys = try inheritedSecret.map {
            try InheritedDeviceRoot(secret: $0, deviceIdentifier: file.deviceIdentifier).keys()
        }
    }

    /// Makes a new root in `tpm` and writes its file at `path` (which must not exist): three NV counters
    /// defined, the root secret sealed for the epoch counter's value, the lockout parameters set where
    /// the TPM lets us. With `inheriting`, the root takes over a software root: its identity, and its
    /// secret sealed beside the root's own (see `inheritedKeys`).
    public static func create(
        tpm: TPM, path: String, lockout: TPMLockoutPolicy, inheriting: InheritedDeviceRoot? = nil
    ) throws -> TPMDeviceRoot {
        try translating {
            lockout.apply(to: tpm)
            let rootSecret = try SecureBytes(randomCount: 32)
            let authorization = try counterAuthorization(rootSecret)
            var defined: [UInt32] = []
            do {
                for _ in 0..<3 { defined.append(try defineCounter(tpm, authorization: authorization)) }
                let epoch = try tpm.readCounter(defined[2])
                // Dead once an erase moves the epoch on: no copy of this file opens again after it.
                let epochPolicy = TPMSealPolicy(counter: (defined[2], epoch))
                let sealed = try tpm.seal(
                    rootSecret, authorization: nil, policy: epochPolicy, dictionaryAttackProtected: false)
                var file = TPMRootFile(
                    deviceIdentifier: try inheriting?.deviceIdentifier ?? Random.bytes(16),
                    primaryName: tpm.primaryName,
                    generationCounter: defined[0], writesCounter: defined[1], epochCounter: defined[2], epoch: epoch,
                    rootSecret: sealed)
                if let inheriting {
                    file.inheritedSecret = try tpm.seal(
                        inheriting.secret, authorization: nil, policy: epochPolicy, dictionaryAttackProtected: false)
                }
                let root = try TPMDeviceRoot(
                    tpm: tpm, file: file, rootSecret: rootSecret, inheritedSecret: inheriting?.secret)
                guard try SecureFiles.createExclusively(SecureBytes(copying: file.encoded()), at: path) else {
                    throw KeybagError.io("device root \(path) was created by another process at the same time")
                }
                return root
            } catch {
                for handle in defined { try? tpm.undefineIndex(handle) }
                throw error
            }
        }
    }

    /// Opens the root whose file is `contents`: the TPM must be the one it was made in.
    public static func load(tpm: TPM, contents: Data, path: String) throws -> TPMDeviceRoot {
        try translating {
            let file = try TPMRootFile.decode(contents, path: path)
            guard ConstantTime.equal(file.primaryName, tpm.primaryName) else {
                throw KeybagError.deviceRootUnavailable(
                    "the TPM at \(tpm.tcti) is not the one this keychain was made in, or it was cleared since: "
                        + "its storage key differs, so the keychain's keys are gone")
            }
            let rootSecret: SecureBytes
            let inheritedSecret: SecureBytes?
            do {
                let epochPolicy = TPMSealPolicy(counter: (file.epochCounter, file.epoch))
                rootSecret = try tpm.unseal(file.rootSecret, authorization: nil, policy: epochPolicy)
                inheritedSecret = try file.inheritedSecret.map {
                    try tpm.unseal($0, authorization: nil, policy: epochPolicy)
                }
            } catch let error as TPMError where error.code == .policyFailed || error.code == .missing {
                throw KeybagError.deviceRootUnavailable(
                    "this device root was erased: its epoch in the TPM has moved on (\(error.reason))")
            }
            return try TPMDeviceRoot(tpm: tpm, file: file, rootSecret: rootSecret, inheritedSecret: inheritedSecret)
        }
    }

    /// What moves the counters on: derived from the root secret, so a program that can send TPM
    /// commands but cannot unseal this keychain's root cannot move them.
    private static func counterAuthorization(_ rootSecret: SecureBytes) throws -> SecureBytes {
        try KeyDerivation.hkdf(key: rootSecret, info: "swift-keychain tpm counter auth v1")
    }

    private static func defineCounter(_ tpm: TPM, authorization: SecureBytes) throws -> UInt32 {
        for _ in 0..<16 {
            let span = TPM.counterHandles.upperBound - TPM.counterHandles.lowerBound
            let handle = TPM.counterHandles.lowerBound + UInt32.random(in: 0...span)
            do {
                _ = try tpm.defineCounter(at: handle, authorization: authorization)
                return handle
            } catch let error as TPMError where error.code == .alreadyDefined {
                continue
            }
        }
        throw KeybagError.deviceRootUnavailable("no free NV handle for the keychain's counters")
    }

    // MARK: DeviceRoot

    public func wrap(_ key: SecureBytes, context: Data) throws -> Data { try keys.wrap(key, context: context) }

    public func unwrap(_ wrapped: Data, context: Data) throws -> SecureBytes {
        do {
            return try keys.unwrap(wrapped, context: context)
        } catch KeybagError.foreignDevice(let reason) {
            guard let inheritedKeys else { throw KeybagError.foreignDevice(reason) }
            return try inheritedKeys.unwrap(wrapped, context: context)
        }
    }

    public func authenticate(_ data: Data) throws -> Data { try (inheritedKeys ?? keys).authenticate(data) }

    public func authenticateKeybag(_ data: Data) throws -> Data { try keys.authenticate(data) }

    public func sealKeybagSecret(_ secret: SecureBytes, generation: UInt64) throws -> Data {
        try Self.translating {
            try tpm.seal(
                secret, authorization: nil, policy: generationPolicy(generation, passcode: false),
                dictionaryAttackProtected: false
            ).encoded()
        }
    }

    public func openKeybagSecret(_ sealed: Data, generation: UInt64) throws -> SecureBytes {
        try Self.translating {
            try tpm.unseal(
                TPMSealedObject.decode(sealed), authorization: nil,
                policy: generationPolicy(generation, passcode: false))
        }
    }

    public func bindPasscode(_ passcodeKey: SecureBytes, generation: UInt64) throws -> PasscodeBinding {
        try Self.translating {
            let secret = try SecureBytes(randomCount: 32)
            let sealed = try tpm.seal(
                secret, authorization: passcodeKey, policy: generationPolicy(generation, passcode: true),
                dictionaryAttackProtected: true)
            return PasscodeBinding(binding: sealed.encoded(), entangled: try Self.mix(secret, passcodeKey))
        }
    }

    public func entangle(_ passcodeKey: SecureBytes, binding: Data, generation: UInt64) throws -> SecureBytes {
        try Self.translating {
            let object = try TPMSealedObject.decode(binding)
            let secret: SecureBytes
            do {
                secret = try tpm.unseal(
                    object, authorization: passcodeKey, policy: generationPolicy(generation, passcode: true))
            } catch let error as TPMError where error.code == .authorizationFailed {
                throw KeybagError.wrongPasscode(failedAttempts: 0)
            } catch let error as TPMError where error.code == .lockout || (error.reachedCheck && !error.isRefusal) {
                // The answer is not trusted by itself (responses are not authenticated): the chip is in
                // lockout only when it says so on its own; otherwise the check may have happened, and
                // the attempt stays counted.
                // (One failure may have been forgiven between the two commands.)
                if let state = try? tpm.lockoutState(), state.inLockout || state.failures &+ 1 >= state.maxTries {
                    throw KeybagError.deviceRootLockedOut(retryAfter: max(Int(state.recoveryTime), 1))
                }
                throw KeybagError.io("the TPM's answer to the passcode check was lost (\(error.reason)): it counts")
            }
            return try Self.mix(secret, passcodeKey)
        }
    }

    /// Enclave keys are made in the chip.
    public var enclaveKeys: (any EnclaveKeyHardware)? { TPMEnclaveKeys(tpm: tpm) }

    /// Moves both counters on: every object sealed for the current generation is dead from here, and
    /// the keybag is refused. (Killed before the files are removed, the directory opens no more:
    /// remove it to start anew; nothing in it opens anywhere.)
    public func retire() throws {
        try Self.translating {
            // The epoch first: it alone kills the root secret, so an erase cut short after it is whole.
            for handle in [file.epochCounter, file.generationCounter, file.writesCounter] {
                let value = try tpm.readCounter(handle)
                try tpm.advanceCounter(handle, to: value &+ 1, authorization: counterAuthorization)
            }
        }
    }

    /// Deletes the counters, once the files are gone. A counter defined again later starts above
    /// every value these held, so no old policy is ever met again; one that is gone already is fine.
    public func release() {
        for handle in [file.generationCounter, file.writesCounter, file.epochCounter] {
            do {
                try tpm.undefineIndex(handle)
            } catch {
                KeychainLog.error("the TPM counter 0x\(String(handle, radix: 16)) stays defined: \(error)")
            }
        }
    }

    /// The key the passcode-protected class keys are wrapped with: the chip's secret, released only
    /// for the right passcode, keyed with the passcode key.
    private static func mix(_ secret: SecureBytes, _ passcodeKey: SecureBytes) throws -> SecureBytes {
        let key = try HMACKey(key: secret, pinned: false)
        return try SecureBytes(count: 32) { out in
            try passcodeKey.withUnsafeBytes { try key.authenticationCode([$0], into: out) }
        }
    }

    private func generationPolicy(_ generation: UInt64, passcode: Bool) -> TPMSealPolicy {
        TPMSealPolicy(counter: (file.generationCounter, generation), authorizationValue: passcode)
    }

    /// The TPM's errors as the keybag's: what a caller can act on, with the TPM's reason kept.
    static func translating<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as TPMError {
            switch error.code {
            case .authorizationFailed:
                // Only `entangle` turns the passcode object's refusal into a wrong passcode.
                throw KeybagError.deviceRootUnavailable(
                    "the TPM refused an authorization (is its owner authorization set?): \(error.reason)")
            case .lockout: throw KeybagError.deviceRootLockedOut(retryAfter: 0)
            case .policyFailed:
                throw KeybagError.rolledBack("the TPM refuses a key of an earlier keybag generation (\(error.reason))")
            case .foreignObject:
                throw KeybagError.deviceRootUnavailable(
                    "a key sealed in the keychain was not made by this TPM, or was edited (\(error.reason))")
            case .missing:
                throw KeybagError.deviceRootUnavailable(
                    "an NV counter of the keychain is gone from the TPM: deleted by another program, or the TPM was cleared (\(error.reason))"
                )
            case .unreachable, .missingPrimary:
                throw KeybagError.deviceRootUnavailable("the TPM does not answer: \(error.reason)")
            case .alreadyDefined, .failed: throw KeybagError.deviceRootUnavailable(error.reason)
            }
        }
    }
}
