import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainSystem

/// The default device root: 32 random bytes in a 0600 file.
///
/// It gives the ThisDeviceOnly guarantee against copies of the keychain directory made without the
/// root file, which by default lives inside that directory (`KEYCHAIN_DEVICE_ROOT` can put it on other
/// storage); not against anyone who can read the root file, such as a process of the same user or a
/// backup that includes it. That is what the TPM backend is for.
public final class SoftwareDeviceRoot: DeviceRoot {
    public let deviceIdentifier: Data
    public let summary: String
    /// The root's file, read again only to hand the secret over (`inheritance`).
    public let path: String
    private let keys: DeviceRootKeys
    private let entanglingKey: HMACKey

    private static let magic = Data("SKDR".utf8)
    private static let formatVersion: UInt8 = 1

    /// Loads the root at `path`, creating it first if it does not exist and `create` is true.
    ///
    /// The file must be the caller's own regular file (no symbolic link), in a directory only the
    /// caller or root can change. Two processes creating it at once both end up with the one that
    /// was linked into place first.
    public static func load(path given: String, create: Bool) throws -> SoftwareDeviceRoot {
        // The directory is resolved (its links checked); the file itself must not be a link.
        let directory = try SecureFiles.trustedPath(PathText.parent(given))
        let path = PathText.join(directory, PathText.lastComponent(given))
        if let contents = try SecureFiles.readSecret(path) {
            // A process killed while creating the root leaves a temporary holding a root key. With the
            // root in place, any temporary is such a leftover, or a creation that has lost its race
            // (it takes the missing temporary as that, see `createExclusively`).
            SecureFiles.removeStaleTemporaries(of: path)
            return try SoftwareDeviceRoot(fileContents: contents, path: path)
        }
        guard create else { throw KeybagError.io("device root \(path) does not exist") }
        // magic ‖ version ‖ identifier (16) ‖ secret (32), assembled in wiped memory.
        let contents = try SecureBytes(count: fileSize) { out in
            var header = ByteWriter()
            header.writeRaw(magic)
            header.write(formatVersion)
            header.writeRaw(try Random.bytes(16))
            header.data.withUnsafeBytes { out.copyMemory(from: $0) }
            try Random.fill(UnsafeMutableRawBufferPointer(rebasing: out[header.data.count...]))
        }
        if try SecureFiles.createExclusively(contents, at: path) {
            return try SoftwareDeviceRoot(fileContents: contents, path: path)
        }
        guard let theirs = try SecureFiles.readSecret(path) else {
            throw KeybagError.io("device root \(path) vanished")
        }
        return try SoftwareDeviceRoot(fileContents: theirs, path: path)
    }

    private static let headerSize = 4 + 1 + 16
    private static let fileSize = headerSize + 32

    private init(fileContents: SecureBytes, path: String) throws {
        let header = fileContents.withUnsafeBytes { Data($0.prefix(Self.headerSize)) }
        if header.prefix(4) == DeviceRootFile.tpmMagic {
            throw KeybagError.deviceRootUnavailable(
                "this keychain's device root is a TPM, which only securityd uses (start it with --tpm)")
        }
        guard fileContents.count == Self.fileSize, header.prefix(4) == Self.magic, header[4] == Self.formatVersion
        else {
            throw KeybagError.corrupt("device root \(path) is not a valid root key file")
        }
        let root = fileContents.withUnsafeBytes { SecureBytes(copying: $0[Self.headerSize...]) }
        deviceIdentifier = header.suffix(16)
        summary = "software (\(path))"
        self.path = path
        keys = try DeviceRootKeys(secret: root, deviceIdentifier: deviceIdentifier, label: Self.keyLabel)
        entanglingKey = try HMACKey(key: KeyDerivation.hkdf(key: root, info: "swift-keychain root entangle v1"))
    }

    public func wrap(_ key: SecureBytes, context: Data) throws -> Data { try keys.wrap(key, context: context) }

    public func unwrap(_ wrapped: Data, context: Data) throws -> SecureBytes {
        try keys.unwrap(wrapped, context: context)
    }

    /// The software root keeps nothing outside its file: an old keybag copy is not noticed.
    public var anchor: (any KeybagAnchor)? { nil }

    public func retire() throws {}

    /// Wrapped like any key: the software root cannot make an old generation unreadable (a copy of the
    /// directory with its root file opens every generation it holds).
    public func sealKeybagSecret(_ secret: SecureBytes, generation: UInt64) throws -> Data {
        try wrap(secret, context: Self.keybagSecretContext(generation))
    }

    public func openKeybagSecret(_ sealed: Data, generation: UInt64) throws -> SecureBytes {
        try unwrap(sealed, context: Self.keybagSecretContext(generation))
    }

    private static func keybagSecretContext(_ generation: UInt64) -> Data {
        var writer = ByteWriter()
        writer.writeRaw(Data("swift-keychain keybag secret v1".utf8))
        writer.write(generation)
        return writer.data
    }

    /// Nothing to bind: a wrong passcode shows only when the class keys do not open.
    public func bindPasscode(_ passcodeKey: SecureBytes, generation: UInt64) throws -> PasscodeBinding {
        PasscodeBinding(binding: Data(), entangled: try entangle(passcodeKey, binding: Data(), generation: generation))
    }

    public func entangle(_ passcodeKey: SecureBytes, binding: Data, generation: UInt64) throws -> SecureBytes {
        try SecureBytes(count: 32) { out in
            try passcodeKey.withUnsafeBytes { try entanglingKey.authenticationCode([$0], into: out) }
        }
    }

    public func authenticate(_ data: Data) throws -> Data { try keys.authenticate(data) }

    /// What `DeviceRootKeys` are derived under.
    static let keyLabel = "swift-keychain root"

    /// The secret and identity, for the hardware root the keychain moves to: the one time a root hands
    /// out its key. The file is read again and must still be this root's.
    public func inheritance() throws -> InheritedDeviceRoot {
        guard let contents = try SecureFiles.readSecret(path), contents.count == Self.fileSize else {
            throw KeybagError.io("device root \(path) has disappeared or changed")
        }
        let identifier = contents.withUnsafeBytes { Data($0[(Self.headerSize - 16)..<Self.headerSize]) }
        guard identifier == deviceIdentifier else { throw KeybagError.io("device root \(path) was replaced") }
        return InheritedDeviceRoot(
            secret: contents.withUnsafeBytes { SecureBytes(copying: $0[Self.headerSize...]) },
            deviceIdentifier: deviceIdentifier)
    }

    /// The magic that starts a software root's file, for telling the kinds of root apart.
    public static let fileMagic = magic
}

/// Opens software roots only: a keychain whose root is a TPM is refused with the reason (the TPM is
/// the daemon's, see docs/tpm.md).
public struct SoftwareDeviceRootProvider: DeviceRootProvider {
    public init() {}

    /// The file is read once: a TPM root's is told apart by its magic as it is parsed.
    public func openRoot(path: String, create: Bool) throws -> any DeviceRoot {
        try SoftwareDeviceRoot.load(path: path, create: create)
    }
}

/// What every kind of root file shares: a four-byte magic naming its kind.
public enum DeviceRootFile {
    /// The magic of a TPM root's file.
    public static let tpmMagic = Data("SKTR".utf8)
}
