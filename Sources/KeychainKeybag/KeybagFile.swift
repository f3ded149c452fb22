import Foundation
import KeychainCrypto

/// The keybag as stored: class keys wrapped by the device root (and, for classes A and C while a
/// passcode is set, by the passcode key entangled with the root), the passcode's KDF parameters, the
/// failed-attempt counter, and a MAC under the root over all of it.
struct KeybagFile: Equatable {
    struct PasscodeParameters: Equatable {
        var salt: Data
        var iterations: UInt32
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
    var failedAttempts: UInt32
    var lastFailure: Double
    var wipeAfterFailures: Bool
    var classKeys: [ProtectionClass: WrappedClassKey]
    /// The key of the searchable digests, wrapped by the root alone: class-D queries work before the
    /// first unlock, so the index must too.
    var indexKey: Data

    static let magic = Data("SKKB".utf8)
    static let formatVersion: UInt8 = 1
    static let macSize = 32

    func encoded(root: any DeviceRoot) throws -> Data {
        var writer = ByteWriter()
        writer.writeRaw(Self.magic)
        writer.write(Self.formatVersion)
        writer.writeRaw(identifier)
        writer.writeRaw(deviceIdentifier)
        if let passcode {
            writer.write(UInt8(1))
            writer.writeBytes(passcode.salt)
            writer.write(passcode.iterations)
        } else {
            writer.write(UInt8(0))
        }
        writer.write(failedAttempts)
        writer.write(lastFailure)
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
        return body + (try root.authenticate(body))
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
            guard version == formatVersion else {
                throw KeybagError.corrupt("keybag format \(version) is not supported")
            }
            let identifier = try reader.readRaw(16)
            let deviceIdentifier = try reader.readRaw(16)
            let expected = try root.authenticate(Data(body))
            guard expected.count == mac.count, zip(expected, mac).allSatisfy({ $0 == $1 }) else {
                if deviceIdentifier != root.deviceIdentifier {
                    throw KeybagError.foreignDevice("the keybag belongs to another device root")
                }
                throw KeybagError.corrupt("keybag integrity check failed")
            }
            var passcode: PasscodeParameters?
            if try reader.read() as UInt8 == 1 {
                passcode = PasscodeParameters(salt: try reader.readBytes(), iterations: try reader.read())
            }
            let failedAttempts: UInt32 = try reader.read()
            let lastFailure: Double = try reader.read()
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
                failedAttempts: failedAttempts, lastFailure: lastFailure, wipeAfterFailures: wipe,
                classKeys: classKeys, indexKey: indexKey)
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
