import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto

/// The key everything in the keybag is wrapped by: the Secure Enclave's UID on iOS; here a software
/// root key file (`SoftwareDeviceRoot`) or a TPM (`TPMDeviceRoot`, in KeychainTPMRoot). A keybag or
/// database copied without the root cannot be opened. With the software root, "without the root" means
/// without its file: a copy that includes the file (the default places it in the keychain directory)
/// opens whatever the passcode does not protect. Only a hardware root keeps its key on the device.
///
/// Implementations never hand out the root key itself, only operations with it, so a hardware
/// backend can keep it inside the hardware.
public protocol DeviceRoot: Sendable {
    /// Names this root; stored in the keybag so a foreign keybag is recognised as such.
    var deviceIdentifier: Data { get }

    /// One line naming the root, for `show-keychain-info` (software or TPM, and which).
    var summary: String { get }

    /// Encrypts `key` under the root, bound to `context`.
    func wrap(_ key: SecureBytes, context: Data) throws -> Data

    /// Reverses `wrap`; throws `KeybagError.foreignDevice` when the blob was not made by this root
    /// (or not for `context`).
    func unwrap(_ wrapped: Data, context: Data) throws -> SecureBytes

    /// A MAC under the root, for the integrity of files beside the keychain the root vouches for (the
    /// daemon's app registry) and for keys derived from it (a biometric enrollment's): the same for
    /// the life of the device, a migration to another root included.
    func authenticate(_ data: Data) throws -> Data

    /// The MAC of the keybag file: `authenticate` unless the root keeps a key of its own for it (a TPM
    /// root that inherited a software root's secret, which the software root's file may still hold in
    /// copies, does not let that secret vouch for its keybag).
    func authenticateKeybag(_ data: Data) throws -> Data

    /// Seals a keybag's own secret (the key its class keys are wrapped with) for keybag `generation`:
    /// a hardware root makes it unreadable once a later generation is committed (`KeybagAnchor`), so
    /// an old keybag copy opens nothing after a passcode change or an erase.
    func sealKeybagSecret(_ secret: SecureBytes, generation: UInt64) throws -> Data

    /// Reverses `sealKeybagSecret`; `KeybagError.rolledBack` when the generation is no longer current.
    func openKeybagSecret(_ sealed: Data, generation: UInt64) throws -> SecureBytes

    /// Binds a new passcode to this root for keybag `generation`: what `entangle` will need besides
    /// the passcode key (empty for the software root; a hardware root keeps a secret that only the
    /// right passcode releases, counting wrong ones itself), and the entangled key itself.
    func bindPasscode(_ passcodeKey: SecureBytes, generation: UInt64) throws -> PasscodeBinding

    /// Mixes the device secret into a passcode-derived key, so that guessing passcodes needs this
    /// device (its root) for every guess. A hardware root checks the passcode itself and throws
    /// `KeybagError.wrongPasscode` (or `.deviceRootLockedOut`) for a wrong one.
    func entangle(_ passcodeKey: SecureBytes, binding: Data, generation: UInt64) throws -> SecureBytes

    /// The counters a keybag of this root is bound to; nil when the root has nowhere to keep them
    /// (the software root: a keybag put back is not noticed).
    var anchor: (any KeybagAnchor)? { get }

    /// Makes and uses enclave keys inside the root's hardware; nil (the default) where the root has
    /// none, and enclave keys are software keys wrapped by the root.
    var enclaveKeys: (any EnclaveKeyHardware)? { get }

    /// Called before the root's file is removed by an erase: a hardware root revokes what it keeps, so
    /// that no copy of the old files opens again.
    func retire() throws

    /// Called once the root's file is gone: a hardware root frees what it kept (best effort).
    func release()
}

extension DeviceRoot {
    public var enclaveKeys: (any EnclaveKeyHardware)? { nil }
    public func release() {}
    public func authenticateKeybag(_ data: Data) throws -> Data { try authenticate(data) }
}

/// A software root's secret and identity, handed to the hardware root a keychain moves to (`security
/// device migrate-root tpm`): what the software root wrapped or authenticated (enclave keys' private
/// halves, device-bound backups, session tokens, the app registry, biometric enrollments) keeps
/// opening under the new root, which keeps the secret sealed in its hardware from then on.
public struct InheritedDeviceRoot: Sendable {
    public let secret: SecureBytes
    public let deviceIdentifier: Data

    public init(secret: SecureBytes, deviceIdentifier: Data) {
        self.secret = secret
        self.deviceIdentifier = deviceIdentifier
    }

    /// The keys the software root derived from the secret.
    public func keys() throws -> DeviceRootKeys {
        try DeviceRootKeys(secret: secret, deviceIdentifier: deviceIdentifier, label: SoftwareDeviceRoot.keyLabel)
    }
}

/// P-256 keys made and used inside a device root's hardware: the private key never leaves it. What
/// the keychain keeps of a key (`keyObject`) loads it again in this hardware alone.
public protocol EnclaveKeyHardware: Sendable {
    /// A new key: its public key (ANSI X9.63, `04 ‖ X ‖ Y`) and what loads it again.
    func createKey() throws -> (publicKey: Data, keyObject: Data)
    /// ECDSA over `digest`: r and s.
    func sign(keyObject: Data, digest: Data) throws -> (r: Data, s: Data)
    /// The raw ECDH shared secret with `peer` (`04 ‖ X ‖ Y`, already checked to be on the curve).
    func sharedSecret(keyObject: Data, peer: Data) throws -> SecureBytes
}

/// A passcode bound to a device root (`DeviceRoot.bindPasscode`).
public struct PasscodeBinding: Sendable {
    /// Stored in the keybag with the passcode's parameters.
    public var binding: Data
    /// What `entangle` returns for this passcode: the key of the passcode-protected class keys.
    public var entangled: SecureBytes

    public init(binding: Data, entangled: SecureBytes) {
        self.binding = binding
        self.entangled = entangled
    }
}

/// Monotonic counters outside the keychain's files (a TPM's NV counters) that the keybag records, so
/// that an older keybag put back is refused: `writes` moves on with every keybag write (the failed
/// attempts), `generation` with every passcode change and erase (the keybag's secret).
public protocol KeybagAnchor: Sendable {
    func generation() throws -> UInt64
    func writes() throws -> UInt64
    /// Moves the counter to exactly `value` (one more than it holds, or what it holds already: safe to
    /// repeat); refuses any other.
    func advanceGeneration(to value: UInt64) throws
    func advanceWrites(to value: UInt64) throws
}

/// Opens the device root of a keychain directory: the software one by default; the daemon's knows the
/// TPM too.
public protocol DeviceRootProvider: Sendable {
    /// The root whose file is at `path`; a new one when there is none and `create` is true.
    func openRoot(path: String, create: Bool) throws -> any DeviceRoot

    /// A new hardware root, its file written at `path` (which must not exist), that takes over
    /// `inheriting`: where a keychain made with the software root moves to. The default refuses: the
    /// software root has no hardware to move to.
    func createMigrationTarget(path: String, inheriting: InheritedDeviceRoot) throws -> any DeviceRoot
}

extension DeviceRootProvider {
    public func createMigrationTarget(path: String, inheriting: InheritedDeviceRoot) throws -> any DeviceRoot {
        throw KeybagError.deviceRootUnavailable(
            "there is no TPM to move the device root to: only securityd started with a TPM (--tpm) can")
    }
}
