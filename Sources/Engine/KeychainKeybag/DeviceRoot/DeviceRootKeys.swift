import FoundationEssentials
import KeychainBytes
import KeychainCrypto

/// What a root derives from its secret, whatever keeps the secret: the key that wraps device-bound
/// keys (AES-256-GCM, bound to the device's identifier) and the key of the keybag's MAC.
public struct DeviceRootKeys: Sendable {
    private let deviceIdentifier: Data
    private let wrappingKey: SecureBytes
    private let authenticationKey: HMACKey

    /// Derives the keys from `secret` with HKDF under `label` (each kind of root its own).
    public init(secret: SecureBytes, deviceIdentifier: Data, label: String) throws {
        self.deviceIdentifier = deviceIdentifier
        wrappingKey = try KeyDerivation.hkdf(key: secret, info: "\(label) wrap v1").pinnedCopy()
        authenticationKey = try HMACKey(key: KeyDerivation.hkdf(key: secret, info: "\(label) mac v1"))
    }

    public func wrap(_ key: SecureBytes, context: Data) throws -> Data {
        try AESGCM.seal(key, key: wrappingKey, authenticating: deviceIdentifier + context)
    }

    /// `KeybagError.foreignDevice` when the blob was not made with these keys for `context`.
    public func unwrap(_ wrapped: Data, context: Data) throws -> SecureBytes {
        do {
            return try AESGCM.openSecure(wrapped, key: wrappingKey, authenticating: deviceIdentifier + context)
        } catch CryptoError.authenticationFailed, CryptoError.malformedCiphertext {
            throw KeybagError.foreignDevice("a key was not wrapped by this device's root")
        }
    }

    public func authenticate(_ data: Data) throws -> Data { try authenticationKey.authenticationCode(data) }
}
