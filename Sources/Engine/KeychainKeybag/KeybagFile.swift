import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto

/// The keybag as stored: class keys wrapped by the device root (and, for classes A and C while a
/// passcode is set, by the passcode key entangled with the root), the passcode's KDF parameters, the
/// failed-attempt counter, and a MAC under the root over all of it.
struct KeybagFile: Equatable {
    struct PasscodeParameters: Equatable {
        var salt: Data
        var function: PasscodeFunction
        /// What the device root keeps for this passcode (`DeviceRoot.bindPasscode`); empty for the
        /// software root and before format 3.
        var binding: Data = Data()
    }

    struct WrappedClassKey: Equatable {
        /// Wrapped under the passcode key (true) or the device root alone (false).
        var passcodeProtected: Bool
        var blob: Data
    }

    /// Random name of this keybag; a new one after a wipe, so other processes drop their stale keys.
    var identifier: Data
    var deviceIdentifier: Data
    var passcode: PasscodeParameters?
    /// Consecutive failed passcode attempts. An attempt is counted before the passcode is checked and
    /// uncounted only when it proved right, so an attempt cut short counts as a failure.
    var failedAttempts: UInt32
    /// When the last attempt was counted: the delays run from it.
    var lastAttempt: AttemptTime
    var wipeAfterFailures: Bool
    var classKeys: [ProtectionClass: WrappedClassKey]
    /// The key of the searchable digests, wrapped by the root alone: class-D queries work before the
    /// first unlock, so the index must too.
    var indexKey: Data
    /// Moves on with every passcode change and erase; the keybag's secret is sealed for it.
    var generation: UInt64 = 0
    /// Moves on with every write of the file; a root with an anchor keeps the same count.
    var writeCount: UInt64 = 0
    /// The keybag's own secret, sealed by the root for `generation` (`DeviceRoot.sealKeybagSecret`):
    /// the key of the class keys that are not under the passcode, and of the index key. Empty in a
    /// keybag from before format 3, whose keys the root wraps directly (upgraded when it is opened).
    var keybagSecret = Data()

    /// A keybag from before format 3.
    var isLegacy: Bool { keybagSecret.isEmpty }

    static let magic = Data("SKKB".utf8)
    /// 3: a generation, a write count and the keybag's sealed secret; the passcode's root binding.
    /// 2 (read only): scrypt and the attempt time on both clocks. 1 (read only): PBKDF2 and a wall-clock
    /// failure time.
    static let formatVersion: UInt8 = 3
    static let macSize = 32

    private enum FunctionTag: UInt8 {
        case pbkdf2 = 1
        case scrypt = 2
    }

    func encoded(root: any DeviceRoot) throws -> Data {
        var writer = ByteWriter()
        writer.writeRaw(Self.magic)
        writer.write(Self.formatVersion)
        writer.writeRaw(identifier)
        writer.writeRaw(deviceIdentifier)
        writer.write(generation)
        writer.write(writeCount)
        writer.writeBytes(keybagSecret)
        if let passcode {
            writer.write(UInt8(1))
            switch passcode.function {
            case .pbkdf2(let iterations):
                writer.write(FunctionTag.pbkdf2.rawValue)
                writer.write(iterations)
            case .scrypt(let logN, let r, let p):
                writer.write(FunctionTag.scrypt.rawValue)
                writer.write(logN)
                writer.write(r)
                writer.write(p)
            }
            writer.writeBytes(passcode.salt)
            writer.writeBytes(passcode.binding)
        } else {
            writer.write(UInt8(0))
        }
        writer.write(failedAttempts)
        writer.write(lastAttempt.wall)
        writer.writeRaw(lastAttempt.boot.boot)
        writer.write(lastAttempt.boot.nanoseconds)
        writer.write(UInt8(wipeAfterFailures ? 1 : 0))
        let classes = classKeys.keys.sorted { $0.rawValue < $1.rawValue }
        writer.write(UInt8(classes.count))
        for protectionClass in classes {
            guard let wrapped = classKeys[protectionClass] else { continue }
            writer.write(UInt8(protectionClass.rawValue))
            writer.write(UInt8(wrapped.passcodeProtected ? 1 : 0))
            writer.writeBytes(wrapped.blob)
        }
        writer.writeBytes(indexKey)
        let body = writer.data
        return body + (try root.authenticateKeybag(body))
    }

    /// Parses and authenticates a keybag file. A MAC that does not verify means the file was made by
    /// another device's root or has been modified; both make it unusable here.
    static func decode(_ contents: Data, root: any DeviceRoot) throws -> KeybagFile {
        guard contents.count > macSize + 5 else { throw KeybagError.corrupt("keybag file is truncated") }
        let body = contents.prefix(contents.count - macSize)
        let mac = contents.suffix(macSize)
        var reader = ByteReader(Data(body))
        do {
            guard try reader.readRaw(4) == magic else { throw KeybagError.corrupt("not a keybag file") }
            let version: UInt8 = try reader.read()
            guard (1...formatVersion).contains(version) else {
                throw KeybagError.corrupt("keybag format \(version) is not supported")
            }
            let identifier = try reader.readRaw(16)
            let deviceIdentifier = try reader.readRaw(16)
            let expected = try root.authenticateKeybag(Data(body))
            guard ConstantTime.equal(expected, Data(mac)) else {
                if deviceIdentifier != root.deviceIdentifier {
                    throw KeybagError.foreignDevice("the keybag belongs to another device root")
                }
                throw KeybagError.corrupt("keybag integrity check failed")
            }
            var generation: UInt64 = 0
            var writeCount: UInt64 = 0
            var keybagSecret = Data()
            if version >= 3 {
                generation = try reader.read()
                writeCount = try reader.read()
                keybagSecret = try reader.readBytes()
                guard !keybagSecret.isEmpty else { throw KeybagError.corrupt("keybag lacks its secret") }
            }
            var passcode: PasscodeParameters?
            let failedAttempts: UInt32
            var lastAttempt = AttemptTime.none
            if version == 1 {
                if try reader.read() as UInt8 == 1 {
                    let salt = try reader.readBytes()
                    passcode = PasscodeParameters(salt: salt, function: .pbkdf2(iterations: try reader.read()))
                }
                failedAttempts = try reader.read()
                // The last failure on the wall clock alone.
                lastAttempt.wall = try reader.read()
            } else {
                if try reader.read() as UInt8 == 1 {
                    let function: PasscodeFunction
                    switch FunctionTag(rawValue: try reader.read()) {
                    case .pbkdf2?: function = .pbkdf2(iterations: try reader.read())
                    case .scrypt?:
                        function = .scrypt(logN: try reader.read(), r: try reader.read(), p: try reader.read())
                    case nil: throw KeybagError.corrupt("keybag names an unknown passcode function")
                    }
                    passcode = PasscodeParameters(salt: try reader.readBytes(), function: function)
                    if version >= 3 { passcode?.binding = try reader.readBytes() }
                }
                failedAttempts = try reader.read()
                lastAttempt = AttemptTime(
                    wall: try reader.read(),
                    boot: BootInstant(boot: try reader.readRaw(16), nanoseconds: try reader.read()))
            }
            if let passcode, !passcode.function.isAcceptable {
                throw KeybagError.corrupt("keybag's passcode cost is out of range")
            }
            let wipe = try reader.read() as UInt8 == 1
            let count: UInt8 = try reader.read()
            var classKeys: [ProtectionClass: WrappedClassKey] = [:]
            for _ in 0..<count {
                let number: UInt8 = try reader.read()
                guard let protectionClass = ProtectionClass(rawValue: Int(number)) else {
                    throw KeybagError.corrupt("keybag names unknown protection class \(number)")
                }
                let protected = try reader.read() as UInt8 == 1
                classKeys[protectionClass] = WrappedClassKey(passcodeProtected: protected, blob: try reader.readBytes())
            }
            let indexKey = try reader.readBytes()
            guard reader.isAtEnd else { throw KeybagError.corrupt("keybag has trailing bytes") }
            return KeybagFile(
                identifier: identifier, deviceIdentifier: deviceIdentifier, passcode: passcode,
                failedAttempts: failedAttempts, lastAttempt: lastAttempt, wipeAfterFailures: wipe,
                classKeys: classKeys, indexKey: indexKey, generation: generation, writeCount: writeCount,
                keybagSecret: keybagSecret)
        } catch is ByteReader.Truncated {
            throw KeybagError.corrupt("keybag file is truncated")
        }
    }

    /// What a wrapped class key is bound to: this keybag, the class, and how it is protected.
    static func context(keybag identifier: Data, protectionClass: ProtectionClass, passcodeProtected: Bool) -> Data {
        var context = Data("class-key".utf8)
        context.append(identifier)
        context.append(UInt8(protectionClass.rawValue))
        context.append(passcodeProtected ? 1 : 0)
        return context
    }

    static func indexKeyContext(keybag identifier: Data) -> Data {
        Data("index-key".utf8) + identifier
    }
}
