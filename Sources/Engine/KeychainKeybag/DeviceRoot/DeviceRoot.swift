import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto

/// The key everything in the keybag is wrapped by: the Secure Enclave's UID on iOS; here a software
/// root key file, and later a TPM. A keybag or database copied without the root cannot be opened. With
/// the software root, "without the root" means without its file: a copy that includes the file (the
/// default places it in the keychain directory) opens whatever the passcode does not protect. Only a
/// hardware root keeps its key on the device.
///
/// Implementations never hand out the root key itself, only operations with it, so a hardware
/// backend can keep it inside the hardware.
public protocol DeviceRoot: Sendable {
    /// Names this root; stored in the keybag so a foreign keybag is recognised as such.
    var deviceIdentifier: Data { get }

    /// Encrypts `key` under the root, bound to `context`.
    func wrap(_ key: SecureBytes, context: Data) throws -> Data

    /// Reverses `wrap`; throws `KeybagError.foreignDevice` when the blob was not made by this root
    /// (or not for `context`).
    func unwrap(_ wrapped: Data, context: Data) throws -> SecureBytes

    /// Mixes the device secret into a passcode-derived key, so that guessing passcodes needs this
    /// device (its root) for every guess.
    func entangle(_ passcodeKey: SecureBytes) throws -> SecureBytes

    /// A MAC under the root, for the integrity of files the root vouches for (the keybag).
    func authenticate(_ data: Data) throws -> Data
}
