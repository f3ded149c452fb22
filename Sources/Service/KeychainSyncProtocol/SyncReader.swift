import Foundation
import KeychainBytes

/// A `ByteReader` whose every failure is the protocol's `malformed`, with bounds on what it allocates.
public struct SyncReader {
    private var reader: ByteReader
    private let what: String

    public init(_ data: Data, _ what: String) {
        reader = ByteReader(data)
        self.what = what
    }

    private func malformed() -> SyncError { SyncError(.malformed, "\(what) is truncated or damaged") }

    public mutating func byte() throws(SyncError) -> UInt8 {
        do { return try reader.read() } catch { throw malformed() }
    }

    public mutating func uint16() throws(SyncError) -> UInt16 {
        do { return try reader.read() } catch { throw malformed() }
    }

    public mutating func uint32() throws(SyncError) -> UInt32 {
        do { return try reader.read() } catch { throw malformed() }
    }

    public mutating func boolean() throws(SyncError) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw malformed()
        }
    }

    public mutating func count(max: Int) throws(SyncError) -> Int {
        let value: UInt32
        do { value = try reader.read() } catch { throw malformed() }
        guard Int(value) <= max else { throw SyncError(.malformed, "\(what) holds more than \(max) entries") }
        return Int(value)
    }

    public mutating func unsigned() throws(SyncError) -> UInt64 {
        do { return try reader.read() } catch { throw malformed() }
    }

    public mutating func signed() throws(SyncError) -> Int64 {
        do { return try reader.read() } catch { throw malformed() }
    }

    public mutating func bytes(max: Int) throws(SyncError) -> Data {
        let value: Data
        do { value = try reader.readBytes() } catch { throw malformed() }
        guard value.count <= max else { throw SyncError(.malformed, "\(what) holds a field over \(max) bytes") }
        return value
    }

    public mutating func fixed(_ count: Int) throws(SyncError) -> Data {
        let value = try bytes(max: count)
        guard value.count == count else { throw SyncError(.malformed, "\(what) holds a field not \(count) bytes long") }
        return value
    }

    public mutating func string(max: Int) throws(SyncError) -> String {
        let raw = try bytes(max: max)
        guard let text = String(data: raw, encoding: .utf8) else {
            throw SyncError(.malformed, "\(what) holds text that is not UTF-8")
        }
        return text
    }

    public func end() throws(SyncError) {
        guard reader.isAtEnd else { throw SyncError(.malformed, "\(what) has bytes after its end") }
    }
}

extension SyncReader {
    /// A reader of a signed body's fields, after the domain it must start with.
    static func fields(of body: Data, domain: Data, what: String) throws(SyncError) -> SyncReader {
        guard body.prefix(domain.count) == domain else { throw SyncError(.malformed, "not \(what)") }
        return SyncReader(body.dropFirst(domain.count), what)
    }

    public mutating func device() throws(SyncError) -> SyncDevice { try SyncDevice.decode(from: &self) }
}

extension ByteWriter {
    public mutating func write(_ value: Bool) { write(UInt8(value ? 1 : 0)) }
    public mutating func writeCount(_ value: Int) { write(UInt32(value)) }
}

/// A statement a device signs (a batch, a head, a checkpoint, a zone key share): its body, which starts
/// with its domain, the id of the device that signs it, and the signature over the body.
public protocol SignedSyncStatement: Sendable {
    /// What the signature covers: the domain, then the statement's fields.
    var body: Data { get }
    /// The id of the device the statement names as its signer (a batch's writer, a head's device, a
    /// checkpoint's signer, a share's sender).
    var signerID: Data { get }
    var signature: Data { get set }
}

extension SignedSyncStatement {
    /// The statement signed by `keys`'s device.
    public func signed(by keys: SyncDeviceKeys) throws(SyncError) -> Self {
        var statement = self
        statement.signature = try keys.sign(body)
        return statement
    }

    /// Whether `device` is the one the statement names, and signed it.
    public func isSigned(by device: SyncDevice) -> Bool {
        device.id == signerID && device.verifies(signature, over: body)
    }

    public func encoded() -> Data { SignedStatement.encode(body: body, signature: signature) }
}

/// The envelope of a signed statement, and its opening.
enum SignedStatement {
    static func encode(body: Data, signature: Data) -> Data {
        var writer = ByteWriter()
        writer.writeBytes(body)
        writer.writeBytes(signature)
        return writer.data
    }

    /// The body's fields (after the domain), the body itself and the signature.
    static func open(_ data: Data, domain: Data, maximumBody: Int, what: String) throws(SyncError) -> (
        fields: SyncReader, body: Data, signature: Data
    ) {
        var outer = SyncReader(data, what)
        let body = try outer.bytes(max: maximumBody)
        let signature = try outer.bytes(max: 256)
        try outer.end()
        return (try SyncReader.fields(of: body, domain: domain, what: what), body, signature)
    }
}
