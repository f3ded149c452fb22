import Foundation
import KeychainBytes

/// The one binary encoding of the keychain's vocabulary (values, dictionaries, results, access
/// controls, contexts, references), used alike by sealed records, enclave-key tokens and the daemon's
/// frames. Integers little-endian; byte strings and strings with a 32-bit length; optionals a 0/1 flag
/// and the value; dictionaries a count and their entries in key order, so equal values encode equal.
public struct ValueWriter {
    private var writer: ByteWriter

    public init(capacity: Int = 256) { writer = ByteWriter(capacity: capacity) }

    /// The bytes written so far.
    public var data: Data { writer.data }
    public var count: Int { writer.count }

    /// Overwrites everything written with zeros, then empties the writer: for output that held secrets.
    public mutating func wipe() { writer.wipe() }

    // MARK: Scalars

    public mutating func byte(_ value: UInt8) { writer.write(value) }
    public mutating func flag(_ value: Bool) { writer.write(UInt8(value ? 1 : 0)) }
    public mutating func unsigned(_ value: UInt32) { writer.write(value) }
    public mutating func unsigned64(_ value: UInt64) { writer.write(value) }
    public mutating func integer(_ value: Int64) { writer.write(value) }
    public mutating func double(_ value: Double) { writer.write(value) }
    public mutating func date(_ value: Date) { writer.write(value.timeIntervalSinceReferenceDate) }
    /// Bytes with no length (fixed-size fields).
    public mutating func raw(_ value: Data) { writer.writeRaw(value) }
    public mutating func bytes(_ value: Data) { writer.writeBytes(value) }
    public mutating func string(_ value: String) { writer.writeString(value) }

    public mutating func strings(_ values: [String]) {
        writer.write(UInt32(values.count))
        for value in values { string(value) }
    }

    /// A secret's bytes; whoever sends them wipes the output after.
    public mutating func secret(_ value: SecureBytes) { value.withUnsafeBytes { writer.writeBytes($0) } }

    public mutating func optional<Value>(_ value: Value?, _ write: (inout ValueWriter, Value) -> Void) {
        flag(value != nil)
        if let value { write(&self, value) }
    }

    // MARK: The vocabulary

    /// A protection class by its `kSecAttrAccessible` name, which outlives any numbering.
    public mutating func protection(_ value: ProtectionClass) { string(value.attributeValue) }

    public mutating func accessControl(_ value: AccessControlPolicy) {
        protection(value.protection)
        writer.write(UInt64(value.flags))
    }

    /// An authentication context: its identifier and what it says of itself (the password is a secret).
    public mutating func context(_ value: AuthenticationContextReference) {
        withUnsafeBytes(of: value.identifier.uuid) { writer.writeRaw(Data($0)) }
        flag(value.interactionNotAllowed)
        optional(value.applicationPassword) { $0.secret($1) }
        optional(value.localizedReason) { $0.string($1) }
    }

    public mutating func reference(_ value: ValueReference) {
        string(value.kind.rawValue)
        optional(value.persistentReference) { $0.bytes($1) }
    }

    public mutating func value(_ value: ItemValue) {
        switch value {
        case .null: byte(ValueTag.null.rawValue)
        case .string(let string):
            byte(ValueTag.string.rawValue)
            self.string(string)
        case .data(let data):
            byte(ValueTag.data.rawValue)
            bytes(data)
        case .integer(let number):
            byte(ValueTag.integer.rawValue)
            integer(number)
        case .double(let number):
            byte(ValueTag.double.rawValue)
            double(number)
        case .date(let date):
            byte(ValueTag.date.rawValue)
            self.date(date)
        case .bool(let value):
            byte(ValueTag.bool.rawValue)
            flag(value)
        case .array(let values):
            byte(ValueTag.array.rawValue)
            unsigned(UInt32(values.count))
            for value in values { self.value(value) }
        case .accessControl(let policy):
            byte(ValueTag.accessControl.rawValue)
            accessControl(policy)
        case .authenticationContext(let context):
            byte(ValueTag.authenticationContext.rawValue)
            self.context(context)
        case .valueReference(let reference):
            byte(ValueTag.valueReference.rawValue)
            self.reference(reference)
        case .unsupported(let name):
            byte(ValueTag.unsupported.rawValue)
            string(name)
        }
    }

    public mutating func dictionary(_ values: [String: ItemValue]) {
        unsigned(UInt32(values.count))
        for key in values.keys.sorted() {
            guard let value = values[key] else { continue }
            string(key)
            self.value(value)
        }
    }

    public mutating func result(_ result: ItemResult) {
        switch result {
        case .data(let data):
            byte(ResultTag.data.rawValue)
            bytes(data)
        case .dictionary(let values):
            byte(ResultTag.dictionary.rawValue)
            dictionary(values)
        case .array(let results):
            byte(ResultTag.array.rawValue)
            unsigned(UInt32(results.count))
            for result in results { self.result(result) }
        }
    }
}
