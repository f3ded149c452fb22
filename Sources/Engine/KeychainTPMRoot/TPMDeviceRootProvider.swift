import Foundation
import KeychainKeybag
import KeychainSystem
import KeychainTPM

/// The daemon's device roots: a keychain's TPM root in `tpm`, its software root while it has one, and a
/// TPM root for a new keychain when there is a TPM. A keychain whose root is a TPM is never opened
/// with another root: without the TPM it is refused with the reason.
public struct TPMDeviceRootProvider: DeviceRootProvider {
    public let tpm: TPM?
    public let lockout: TPMLockoutPolicy

    public init(tpm: TPM?, lockout: TPMLockoutPolicy = .standard) {
        self.tpm = tpm
        self.lockout = lockout
    }

    public func openRoot(path: String, create: Bool) throws -> any DeviceRoot {
        let directory = try SecureFiles.trustedPath((path as NSString).deletingLastPathComponent)
        let file = (directory as NSString).appendingPathComponent((path as NSString).lastPathComponent)
        guard let contents = try SecureFiles.read(file) else {
            guard create else { throw KeybagError.io("device root \(file) does not exist") }
            guard let tpm else { return try SoftwareDeviceRoot.load(path: file, create: true) }
            return try TPMDeviceRoot.create(tpm: tpm, path: file, lockout: lockout)
        }
        guard contents.prefix(4) == DeviceRootFile.tpmMagic else {
            return try SoftwareDeviceRoot.load(path: file, create: false)
        }
        guard let tpm else {
            throw KeybagError.deviceRootUnavailable(
                "this keychain's device root is a TPM, and securityd was started without one (--tpm TCTI)")
        }
        return try TPMDeviceRoot.load(tpm: tpm, contents: contents, path: file)
    }

    public func createMigrationTarget(path: String, inheriting: InheritedDeviceRoot) throws -> any DeviceRoot {
        guard let tpm else {
            throw KeybagError.deviceRootUnavailable(
                "securityd was started without a TPM (--tpm TCTI): there is no TPM to move the device root to")
        }
        let directory = try SecureFiles.trustedPath((path as NSString).deletingLastPathComponent)
        let file = (directory as NSString).appendingPathComponent((path as NSString).lastPathComponent)
        return try TPMDeviceRoot.create(tpm: tpm, path: file, lockout: lockout, inheriting: inheriting)
    }
}
