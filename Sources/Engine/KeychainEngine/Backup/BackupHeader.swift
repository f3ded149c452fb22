import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainKeybag

/// A backup file, start to end:
///
///     header:  "SKBK" ‖ version (1) ‖ flags (1; bit 0: device-bound) ‖ keybag UUID (16) ‖ created
///              (ms since 1970, 8) ‖ password KDF: logN (1) ‖ r (4) ‖ p (4) ‖ salt (bytes) ‖ wrapped
///              master key (bytes) ‖ class count (1) ‖ per class: protection (1) ‖ wrap (1) ‖ wrapped
///              class key (bytes)
///     items:   per item: length (4, > 0) ‖ protection (1) ‖ item class (1) ‖ sealed item; then a
///              length of 0
///     summary: length (4) ‖ the counts (`BackupCounts`)
///     MAC:     HMAC-SHA256 of every byte before it, keyed from the master key (32)
///
/// Integers are little-endian; "bytes" are a 4-byte length and the bytes. The header is the backup
/// keybag (Apple's `VERS`, `TYPE`, `UUID`, `SALT`, `ITER`, then per class `CLAS`, `WRAP`, `WPKY`).
/// `info` reads the header and the summary without the password; a restore checks the MAC over the
/// whole file before it writes anything.
struct BackupHeader {
    static let magic = Data("SKBK".utf8)
    static let version: UInt8 = 1
    /// Bounds a file's header may claim, so that a damaged one cannot make the reader allocate or
    /// derive without limit.
    static let maximumWrappedKey = 4096
    static let maximumItem = 80 << 20

    /// How a class key is wrapped, as Apple's keybag `WRAP` says it.
    enum Wrap: UInt8 {
        /// By the device root alone: restores only onto this device.
        case device = 1
        /// By the backup password alone: migrates to another device.
        case password = 2
        /// By the password and the device root: restores only onto this device, with the password.
        case passwordAndDevice = 3
    }

    struct WrappedClass {
        let protection: ProtectionClass
        let wrap: Wrap
        let wrapped: Data
    }

    var deviceBound: Bool
    var uuid: Data
    var created: Date
    var passwordFunction: PasscodeFunction
    var salt: Data
    var wrappedMaster: Data
    var classes: [WrappedClass]

    func encoded() -> Data {
        var writer = ByteWriter()
        writer.writeRaw(Self.magic)
        writer.write(Self.version)
        writer.write(UInt8(deviceBound ? 1 : 0))
        writer.writeRaw(uuid)
        writer.write(Int64((created.timeIntervalSince1970 * 1000).rounded()))
        if case .scrypt(let logN, let r, let p) = passwordFunction {
            writer.write(logN)
            writer.write(r)
            writer.write(p)
        } else {
            writer.write(UInt8(0))
            writer.write(UInt32(0))
            writer.write(UInt32(0))
        }
        writer.writeBytes(salt)
        writer.writeBytes(wrappedMaster)
        writer.write(UInt8(classes.count))
        for entry in classes {
            writer.write(UInt8(entry.protection.rawValue))
            writer.write(entry.wrap.rawValue)
            writer.writeBytes(entry.wrapped)
        }
        return writer.data
    }

    /// Reads and checks a header from the start of `input`; returns it with its bytes, which the MAC
    /// covers.
    static func read(from input: BackupInput) throws -> (BackupHeader, Data) {
        var bytes = Data()
        func take(_ count: Int) throws -> Data {
            let piece = try input.read(count)
            bytes.append(piece)
            return piece
        }
        func takeInteger<T: FixedWidthInteger>(_: T.Type) throws -> T {
            try take(MemoryLayout<T>.size).withUnsafeBytes { T(littleEndian: $0.loadUnaligned(as: T.self)) }
        }
        func takeBytes(limit: Int) throws -> Data {
            let count = Int(try takeInteger(UInt32.self))
            guard count <= limit else { throw KeychainError.decode("the backup file's keybag is damaged") }
            return try take(count)
        }
        guard input.size >= 4, try take(4) == magic else {
            throw KeychainError.decode("not a keychain backup file")
        }
        let version = try take(1)[0]
        guard version == Self.version else {
            throw KeychainError.decode(
                "a backup of format version \(version); this build reads version \(Self.version)")
        }
        let flags = try take(1)[0]
        guard flags & ~1 == 0 else { throw KeychainError.decode("the backup file's header is damaged") }
        let uuid = try take(16)
        let milliseconds = try takeInteger(Int64.self)
        let logN = try take(1)[0]
        let r = try takeInteger(UInt32.self)
        let p = try takeInteger(UInt32.self)
        let function = PasscodeFunction.scrypt(logN: logN, r: r, p: p)
        let deviceBound = flags & 1 == 1
        // Checked before anything is derived from it.
        guard deviceBound || BackupKeybag.isAcceptable(function) else {
            throw KeychainError.decode("the backup file's password function is out of bounds (damaged)")
        }
        let salt = try takeBytes(limit: 64)
        let master = try takeBytes(limit: maximumWrappedKey)
        let count = Int(try take(1)[0])
        guard count <= ProtectionClass.allCases.count else {
            throw KeychainError.decode("the backup file's keybag is damaged")
        }
        var classes: [WrappedClass] = []
        for _ in 0..<count {
            let protectionByte = try take(1)[0]
            let wrapByte = try take(1)[0]
            guard let protection = ProtectionClass(rawValue: Int(protectionByte)), let wrap = Wrap(rawValue: wrapByte),
                !classes.contains(where: { $0.protection == protection })
            else { throw KeychainError.decode("the backup file's keybag is damaged") }
            classes.append(
                WrappedClass(protection: protection, wrap: wrap, wrapped: try takeBytes(limit: maximumWrappedKey)))
        }
        let header = BackupHeader(
            deviceBound: deviceBound, uuid: uuid, created: Date(timeIntervalSince1970: Double(milliseconds) / 1000),
            passwordFunction: function, salt: salt, wrappedMaster: master, classes: classes)
        return (header, bytes)
    }
}

/// The counts a backup ends with: what `info` shows, and what a restore checks it read.
struct BackupCounts: Equatable {
    var perClass: [ItemClass: Int] = [:]
    var perProtection: [ProtectionClass: Int] = [:]
    var skipped: [BackupSkip: Int] = [:]

    var items: Int { perClass.values.reduce(0, +) }

    func encoded(uuid: Data) -> Data {
        var writer = ByteWriter()
        writer.writeRaw(uuid)
        for itemClass in ItemClass.allCases { writer.write(UInt32(perClass[itemClass] ?? 0)) }
        for protection in ProtectionClass.allCases { writer.write(UInt32(perProtection[protection] ?? 0)) }
        for reason in BackupSkip.allCases { writer.write(UInt32(skipped[reason] ?? 0)) }
        return writer.data
    }

    static var encodedSize: Int {
        16 + 4 * (ItemClass.allCases.count + ProtectionClass.allCases.count + BackupSkip.allCases.count)
    }

    static func decode(_ data: Data) throws -> (uuid: Data, counts: BackupCounts) {
        guard data.count == encodedSize else { throw KeychainError.decode("the backup file's summary is damaged") }
        var reader = ByteReader(data)
        do {
            let uuid = try reader.readRaw(16)
            var counts = BackupCounts()
            for itemClass in ItemClass.allCases { counts.perClass[itemClass] = Int(try reader.read() as UInt32) }
            for protection in ProtectionClass.allCases {
                counts.perProtection[protection] = Int(try reader.read() as UInt32)
            }
            for reason in BackupSkip.allCases { counts.skipped[reason] = Int(try reader.read() as UInt32) }
            return (uuid, counts)
        } catch {
            throw KeychainError.decode("the backup file's summary is damaged")
        }
    }

    func summary(of header: BackupHeader) -> BackupSummary {
        BackupSummary(
            formatVersion: Int(BackupHeader.version), keybagUUID: UUID(uuidBytes: header.uuid) ?? UUID(),
            created: header.created, deviceBound: header.deviceBound,
            itemsPerClass: Dictionary(
                uniqueKeysWithValues: perClass.filter { $0.value > 0 }.map { ($0.key.name, $0.value) }),
            itemsPerProtection: Dictionary(
                uniqueKeysWithValues: perProtection.filter { $0.value > 0 }.map { ($0.key.attributeValue, $0.value) }),
            skipped: Dictionary(
                uniqueKeysWithValues: skipped.filter { $0.value > 0 }.map { ($0.key.rawValue, $0.value) }))
    }
}

extension UUID {
    /// A UUID from its 16 bytes; nil for any other length.
    init?(uuidBytes bytes: Data) {
        guard bytes.count == 16 else { return nil }
        let b = [UInt8](bytes)
        self.init(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }
}
