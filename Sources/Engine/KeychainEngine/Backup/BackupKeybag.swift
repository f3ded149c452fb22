import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag

/// A backup's own keybag, as Apple's backup keybag: fresh class keys and a UUID for every backup.
///
/// A random master key is wrapped under the backup password (scrypt, its parameters in the header),
/// or, without a password, under the device root. The class keys are sealed under a key derived from
/// the master; the `ThisDeviceOnly` classes are then wrapped by the device root as well, so that on
/// another device they do not open and their items are absent, not an error. The file's MAC is keyed
/// from the master too, so nobody without the password (or, device-bound, the device) can change a
/// byte of the file unnoticed.
struct BackupKeybag {
    /// The least a backup password is stretched with: scrypt at N = 2^17 (128 MiB), r = 8, p = 1. A
    /// backup leaves the device, so unlike the passcode its guesses are not tied to the device root:
    /// it costs more than the passcode's minimum (N = 2^15, r = 8, p = 3) in time and four times in memory.
    static let minimumPasswordFunction = PasscodeFunction.scrypt(logN: 17, r: 8, p: 1)

    /// What a backup may be made with, and what a header may name: the minimum or more, and at most
    /// 1 GiB of memory and four passes, so that a file planted for someone to restore cannot make the
    /// derivation take the machine's memory or hours (it runs before the password is known to be right).
    static func isAcceptable(_ function: PasscodeFunction) -> Bool {
        guard case .scrypt(let logN, let r, let p) = function else { return false }
        return (17...20).contains(logN) && (8...16).contains(r) && (1...4).contains(p)
            && 128 * UInt64(r) << UInt64(logN) <= 1 << 30
    }

    let uuid: Data
    let master: SecureBytes
    private(set) var classKeys: [ProtectionClass: SecureBytes]

    /// The classes a backup carries: every class but `WhenPasscodeSetThisDeviceOnly`, which never
    /// leaves the device.
    static let classes: [ProtectionClass] = ProtectionClass.allCases.filter { $0 != .whenPasscodeSetThisDeviceOnly }

    /// A fresh keybag and the header that stores it.
    static func make(password: SecureBytes?, function: PasscodeFunction, keybag: Keybag, now: Date) throws -> (
        BackupKeybag, BackupHeader
    ) {
        // A version-4 UUID (RFC 9562): random, with its version and variant bits set.
        var uuid = try Random.bytes(16)
        uuid[6] = uuid[6] & 0x0f | 0x40
        uuid[8] = uuid[8] & 0x3f | 0x80
        let master = try SecureBytes(randomCount: 32)
        let salt = password == nil ? Data() : try Random.bytes(32)
        let wrappedMaster: Data
        if let password {
            let passwordKey = try function.derive(password, salt: salt)
            wrappedMaster = try AESGCM.seal(master, key: passwordKey, authenticating: masterContext(uuid))
        } else {
            wrappedMaster = try keybag.wrapDeviceBound(master, context: masterContext(uuid))
        }
        let sealing = try classSealingKey(master)
        var keys: [ProtectionClass: SecureBytes] = [:]
        var entries: [BackupHeader.WrappedClass] = []
        for protection in classes {
            let key = try SecureBytes(randomCount: AESGCM.keySize)
            let wrap: BackupHeader.Wrap =
                password == nil ? .device : (protection.migrates ? .password : .passwordAndDevice)
            var wrapped = try AESGCM.seal(key, key: sealing, authenticating: classContext(uuid, protection, wrap))
            if wrap == .passwordAndDevice {
                wrapped = try keybag.wrapDeviceBound(
                    SecureBytes(copying: wrapped), context: classContext(uuid, protection, wrap))
            }
            keys[protection] = key
            entries.append(BackupHeader.WrappedClass(protection: protection, wrap: wrap, wrapped: wrapped))
        }
        let header = BackupHeader(
            deviceBound: password == nil, uuid: uuid, created: now, passwordFunction: function, salt: salt,
            wrappedMaster: wrappedMaster, classes: entries)
        return (BackupKeybag(uuid: uuid, master: master, classKeys: keys), header)
    }

    /// Opens a header's keybag: the master with the password (or the device root), then each class
    /// key this device can open. A wrong password is `authenticationFailed`; a device-bound backup of
    /// another device is `decode`, nothing of it being readable here.
    static func open(_ header: BackupHeader, password: SecureBytes?, keybag: Keybag) throws -> BackupKeybag {
        let master: SecureBytes
        if header.deviceBound {
            do {
                master = try keybag.unwrapDeviceBound(header.wrappedMaster, context: masterContext(header.uuid))
            } catch KeybagError.foreignDevice {
                throw KeychainError.decode(
                    "the backup was made without a password on another keychain: it restores only there")
            }
        } else {
            guard let password else {
                throw KeychainError.authenticationFailed("the backup has a password: give it to restore")
            }
            let passwordKey = try header.passwordFunction.derive(password, salt: header.salt)
            do {
                master = try AESGCM.openSecure(
                    header.wrappedMaster, key: passwordKey, authenticating: masterContext(header.uuid))
            } catch {
                throw KeychainError.authenticationFailed("wrong backup password")
            }
        }
        let sealing = try classSealingKey(master)
        var keys: [ProtectionClass: SecureBytes] = [:]
        for entry in header.classes {
            // Each class wrapped as the rules say, or the file was not made by this build.
            let expected: BackupHeader.Wrap =
                header.deviceBound ? .device : (entry.protection.migrates ? .password : .passwordAndDevice)
            guard entry.wrap == expected, classes.contains(entry.protection) else {
                throw KeychainError.decode("the backup file's keybag is damaged (a class wrapped against the rules)")
            }
            let context = classContext(header.uuid, entry.protection, entry.wrap)
            var sealed = entry.wrapped
            if entry.wrap == .passwordAndDevice {
                do {
                    sealed = try keybag.unwrapDeviceBound(entry.wrapped, context: context).withUnsafeBytes { Data($0) }
                } catch KeybagError.foreignDevice {
                    // Another device's class: absent here, as Apple's ThisDeviceOnly items are.
                    continue
                }
            }
            guard let key = try? AESGCM.openSecure(sealed, key: sealing, authenticating: context) else {
                throw KeychainError.decode("the backup file's keybag is damaged")
            }
            keys[entry.protection] = key
        }
        return BackupKeybag(uuid: header.uuid, master: master, classKeys: keys)
    }

    /// The file's MAC key.
    func macKey() throws -> HMACKey {
        try HMACKey(key: try KeyDerivation.hkdf(key: master, info: "swift-keychain backup mac v1"), pinned: false)
    }

    /// The authenticated data of an item sealed under its class key: the keybag and the classes, so an
    /// item cannot be moved into another backup or another class.
    func itemContext(protection: ProtectionClass, itemClass: ItemClass) -> Data {
        var context = Data("swift-keychain backup item v1".utf8)
        context.append(uuid)
        context.append(UInt8(protection.rawValue))
        context.append(UInt8(itemClass.rawValue))
        return context
    }

    private static func classSealingKey(_ master: SecureBytes) throws -> SecureBytes {
        try KeyDerivation.hkdf(key: master, info: "swift-keychain backup class keys v1")
    }

    private static func masterContext(_ uuid: Data) -> Data { Data("swift-keychain backup master v1".utf8) + uuid }

    private static func classContext(_ uuid: Data, _ protection: ProtectionClass, _ wrap: BackupHeader.Wrap) -> Data {
        Data("swift-keychain backup class v1".utf8) + uuid + Data([UInt8(protection.rawValue), wrap.rawValue])
    }
}

extension ProtectionClass {
    /// Whether items of this class move to another device with a password backup (Apple: "migrate to
    /// a new device when using encrypted backups"); the `ThisDeviceOnly` classes do not.
    var migrates: Bool { self == .whenUnlocked || self == .afterFirstUnlock || self == .always }
}
