import Dispatch
import FoundationEssentials
import KeychainBytes
import KeychainCrypto

/// The secrets besides the item key that a guarded item's secret is sealed under: the enrollment
/// secret of the biometry it is bound to (`biometryCurrentSet`), the key that exists while a passcode
/// is set (`devicePasscode`), and the application password
/// (`applicationPassword`), stretched with scrypt so that guessing it from a copy of the keychain
/// costs a derivation per guess. A guarded item with neither still has its own blob version, so its
/// secret never opens on the path for unguarded items.
struct SecretFactors: Sendable {
    var enrollment: SecureBytes?
    var applicationPassword: SecureBytes?
    /// The class key of `WhenPasscodeSetThisDeviceOnly`, which exists only while a passcode is set (and
    /// is destroyed when it is removed), for items whose access control names the device passcode.
    var passcodeClass: SecureBytes?

    /// scrypt at N = 2^15, r = 8, p = 1 (about 32 MiB): the item's salt makes every item's derivation
    /// its own.
    static let passwordLogN: UInt8 = 15

    /// Derivations at once, in the whole process: each takes 32 MiB, and the daemon must not let a
    /// user's many connections take its memory (or every core).
    private static let derivations = DispatchSemaphore(value: max(1, ProcessInfo.processInfo.activeProcessorCount))

    func contentKey(itemKey: SecureBytes, salt: Data) throws -> SecureBytes {
        var tags = "swift-keychain guarded secret v2"
        var parts: [SecureBytes] = [itemKey]
        if let enrollment {
            tags += " enrollment"
            parts.append(enrollment)
        }
        if let passcodeClass {
            tags += " device-passcode"
            parts.append(passcodeClass)
        }
        if let applicationPassword {
            tags += " application-password"
            Self.derivations.wait()
            defer { Self.derivations.signal() }
            parts.append(
                try KeyDerivation.scrypt(
                    password: applicationPassword, salt: salt, logN: Self.passwordLogN, r: 8, p: 1))
        }
        let total = parts.reduce(salt.count) { $0 + $1.count }
        let material = try SecureBytes(count: total) { out in
            var offset = 0
            salt.withUnsafeBytes { bytes in
                UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + bytes.count]).copyMemory(from: bytes)
                offset += bytes.count
            }
            for part in parts {
                part.withUnsafeBytes { bytes in
                    UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + bytes.count]).copyMemory(
                        from: bytes)
                    offset += bytes.count
                }
            }
        }
        return try KeyDerivation.hkdf(key: material, info: tags)
    }
}
