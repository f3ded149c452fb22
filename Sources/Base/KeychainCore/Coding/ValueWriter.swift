import FoundationEssentials
import KeychainBytes

/// The one binary encoding of the keychain's vocabulary (values, dictionaries, results, access
/// controls, contexts, references), used alike by sealed records, enclave-key tokens and the daemon's
/// frames. Integers little-endian; byte strings and strings with a 32-bit length; optionals a 0/1 flag
/// and the value; dictionaries a count and their entries in key order, so equal values encode equal.
public struct ValueWriter {
    private var writer: ByteWriter

    /// An empty writer; `capacity` reserves room for what the caller expects to write.
    public init(capacity: Int = 256) { writer = ByteWriter(capacity: capacity) }

    /// The bytes written so far.
    public var data: Data { writer.data }
    /// How many bytes have been written.
    public var count: Int { writer.count }

    /// Overwrites everything written with zeros, then empties the writer: for output that held secrets.
    public mutating func wipe() { writer.wipe() }

    /// What was written, moved into wiped memory (the writer is wiped and emptied): for output that
    /// holds a secret and goes on to be sealed.
    public mutating func takeSecure() -> SecureBytes { writer.takeSecure() }

    // MARK: Scalars

    /// One byte.
    public mutating func byte(_ value: UInt8) { writer.write(value) }
    /// A Bool as the byte 0 or 1.
    public mutating func flag(_ value: Bool) { writer.write(UInt8(value ? 1 : 0)) }
    /// A little-endian 32-bit unsigned integer.
    public mutating func unsigned(_ value: UInt32) { writer.write(value) }
    /// A little-endian 64-bit unsigned integer.
    public mutating func unsigned64(_ value: UInt64) { writer.write(value) }
    /// A little-endian 64-bit signed integer.
    public mutating func integer(_ value: Int64) { writer.write(value) }
    /// A Double's little-endian 64-bit pattern.
    public mutating func double(_ value: Double) { writer.write(value) }
    /// A date as seconds since 2001-01-01 00:00 UTC (Core Foundation's reference date), as a Double.
    public mutating func date(_ value: Date) { writer.write(value.timeIntervalSinceReferenceDate) }
    /// Bytes with no length (fixed-size fields).
    public mutating func raw(_ value: Data) { writer.writeRaw(value) }
    /// A byte string after its 32-bit length.
    public mutating func bytes(_ value: Data) { writer.writeBytes(value) }
    /// A string's UTF-8 after its 32-bit length.
    public mutating func string(_ value: String) { writer.writeString(value) }

    /// A list of strings after its count.
    public mutating func strings(_ values: [String]) {
        writer.write(UInt32(values.count))
        for value in values { string(value) }
    }

    /// A secret's bytes; whoever sends them wipes the output after.
    public mutating func secret(_ value: SecureBytes) { value.withUnsafeBytes { writer.writeSecretBytes($0) } }

    /// A flag for whether `value` is there, then the value as `write` writes it.
    public mutating func optional<Value>(_ value: Value?, _ write: (inout ValueWriter, Value) -> Void) {
        flag(value != nil)
        if let value { write(&self, value) }
    }

    // MARK: The vocabulary

    /// A protection class by its `kSecAttrAccessible` name, which outlives any numbering.
    public mutating func protection(_ value: ProtectionClass) { string(value.attributeValue) }

    /// An access control: its protection class, then its flag bits as 64 bits.
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

    /// A Security object reference: its kind by name, then its persistent reference if it has one.
    public mutating func reference(_ value: ValueReference) {
        string(value.kind.rawValue)
        optional(value.persistentReference) { $0.bytes($1) }
    }

    /// One value: its `ValueTag`, then its contents.
    public mutating func value(_ value: ItemValue) {
        switch value {
        case .null: byte(ValueTag.null.rawValue)
        case .string(let string):
            byte(ValueTag.string.rawValue)
            self.string(string)
        case .data(let data):
            byte(ValueTag.data.rawValue)
            bytes(data)
        case .secret(let bytes):
            byte(ValueTag.secret.rawValue)
            secret(bytes)
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

    /// A dictionary: its count, then its entries sorted by key, so that equal dictionaries encode to
    /// equal bytes whatever their order in memory.
    public mutating func dictionary(_ values: [String: ItemValue]) {
        unsigned(UInt32(values.count))
        for key in values.keys.sorted() {
            guard let value = values[key] else { continue }
            string(key)
            self.value(value)
        }
    }

    /// One query result: its `ResultTag`, then its contents.
    public mutating func result(_ result: ItemResult) {
        switch result {
        case .data(let data):
            byte(ResultTag.data.rawValue)
            bytes(data)
        case .secret(let bytes):
            byte(ResultTag.secret.rawValue)
            secret(bytes)
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
