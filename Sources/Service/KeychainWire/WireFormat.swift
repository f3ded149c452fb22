import FoundationEssentials
import KeychainCore

/// The daemon protocol's frames: a fixed header, then a payload of at most `maximumPayload` bytes.
///
///     magic "SKWP" (4) ‖ version (1) ‖ kind (1) ‖ request id (4, little-endian) ‖ payload length (4) ‖ payload
///
/// A reader takes the header first, checks it (`FrameHeader.init(_:)`), and only then reads as many
/// payload bytes as it announces: nothing is allocated for a length that is out of bounds.
public enum WireFormat {
    public static let magic = Data("SKWP".utf8)
    public static let version: UInt8 = 8
    public static let headerSize = 14
    /// Room for a 64 MiB secret (the `security` command's limit) and its query.
    public static let maximumPayload = 80 << 20
    /// Nesting of arrays and results, entries of one dictionary or array: far above anything a SecItem
    /// query holds, low enough that no frame can make the decoder recurse or allocate without bound.
    public static let maximumDepth = 8
    public static let maximumEntries = 4096
    /// Values, results and keys in one frame, all told: a frame of nested empty arrays would otherwise
    /// decode into far more memory than it takes on the wire.
    public static let maximumValues = 65_536
}

/// What a frame carries.
public enum FrameKind: UInt8, Sendable {
    case request = 1
    case answer = 2
    case failure = 3
    /// A control of the keychain or the simulated device (`KeychainAdminRequest`), with tags of its own.
    case adminRequest = 4
    /// How far a long control has come (a backup, a restore): items done and in all, sent by the daemon
    /// before the answer, with the request's id.
    case progress = 5
}

/// A request as it arrives: what an app asks, or a control.
public enum WireRequest: Sendable {
    case keychain(KeychainRequest)
    case admin(KeychainAdminRequest)

    /// Whether the daemon sends progress frames before the answer: a backup's and a restore's.
    public var reportsProgress: Bool {
        switch self {
        case .admin(.createBackup), .admin(.restoreBackup): true
        default: false
        }
    }

    /// The request's name, for logs and tests; never its values.
    public var name: String {
        switch self {
        case .keychain(let request): request.name
        case .admin(let request): request.name
        }
    }

    /// The descriptor this request carries beside its frame, if it names one.
    public var passedDescriptor: Int32? {
        switch self {
        case .admin(.createBackup(.descriptor(let descriptor), _, _)),
            .admin(.restoreBackup(.descriptor(let descriptor), _, _)):
            descriptor
        default: nil
        }
    }

    /// The request with the descriptor that came beside its frame put in (a decoded one holds -1).
    public func receiving(_ descriptor: Int32) -> WireRequest {
        switch self {
        case .admin(.createBackup(.descriptor, let password, let passcode)):
            .admin(.createBackup(file: .descriptor(descriptor), password: password, passcode: passcode))
        case .admin(.restoreBackup(.descriptor, let password, let passcode)):
            .admin(.restoreBackup(file: .descriptor(descriptor), password: password, passcode: passcode))
        default: self
        }
    }
}

/// Why bytes were refused: the connection they came on is not to be trusted any further.
public struct WireError: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { "bad frame: \(reason)" }
}

/// A checked frame header.
public struct FrameHeader: Equatable, Sendable {
    public let kind: FrameKind
    public let requestID: UInt32
    public let payloadLength: Int

    public init(kind: FrameKind, requestID: UInt32, payloadLength: Int) {
        self.kind = kind
        self.requestID = requestID
        self.payloadLength = payloadLength
    }

    /// Parses and checks the first `WireFormat.headerSize` bytes of `bytes`.
    public init(_ bytes: Data) throws(WireError) {
        guard bytes.count >= WireFormat.headerSize else { throw WireError("the header is truncated") }
        let (magic, version, kindByte, id, length) = bytes.withUnsafeBytes { raw in
            (
                raw.loadUnaligned(fromByteOffset: 0, as: UInt32.self), raw[4], raw[5],
                UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 6, as: UInt32.self)),
                UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 10, as: UInt32.self))
            )
        }
        guard magic == Self.magicWord else { throw WireError("not a keychain frame") }
        guard version == WireFormat.version else {
            throw WireError("protocol version \(version) is not spoken here")
        }
        guard let kind = FrameKind(rawValue: kindByte) else { throw WireError("unknown frame kind \(kindByte)") }
        guard Int(length) <= WireFormat.maximumPayload else {
            throw WireError("a payload of \(length) bytes is over the limit of \(WireFormat.maximumPayload)")
        }
        self.init(kind: kind, requestID: id, payloadLength: Int(length))
    }

    /// "SKWP" as the first four bytes read in memory order.
    private static let magicWord = WireFormat.magic.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }

    var encoded: Data {
        var bytes = WireFormat.magic
        bytes.append(WireFormat.version)
        bytes.append(kind.rawValue)
        withUnsafeBytes(of: requestID.littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(payloadLength).littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }
}
