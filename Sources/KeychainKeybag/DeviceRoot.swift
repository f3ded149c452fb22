import Foundation
import KeychainCrypto

/// The key that never leaves the device: the Secure Enclave's UID on iOS; here a software root key
/// file, and later a TPM. Everything in the keybag is wrapped by it, so a keybag or database copied to
/// another machine cannot be opened there.
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
