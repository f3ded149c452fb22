import FoundationEssentials
import KeychainBytes

/// Reads what `ValueWriter` wrote. Every read checks its bounds, every tag and flag is one this build
/// knows, every string is UTF-8, and the `limits` bound what the input can make it build; anything
/// else throws `FormatError`, never traps.
public struct ValueReader {
    private var reader: ByteReader
    private let limits: DecodingLimits
    /// Values and results still allowed (`DecodingLimits.maximumValues`).
    private var budget: Int

    /// A reader of `data` that may build at most what `limits` allow: `.authenticated` for bytes this
    /// program sealed, tighter limits for a frame from another process.
    public init(_ data: Data, limits: DecodingLimits) {
        reader = ByteReader(data)
        self.limits = limits
        budget = limits.maximumValues
    }

    /// Whether every byte has been read.
    public var isAtEnd: Bool { reader.isAtEnd }

    /// Throws unless every byte was read: an input decodes completely or not at all.
    public func finish() throws(FormatError) {
        guard reader.isAtEnd else { throw FormatError("bytes follow the end") }
    }

    private mutating func spend() throws(FormatError) {
        budget -= 1
        guard budget >= 0 else { throw FormatError("more than \(limits.maximumValues) values in one \(limits.input)") }
    }

    private mutating func scalar<T>(_ read: (inout ByteReader) throws(ByteReader.Truncated) -> T) throws(FormatError)
        -> T
    {
        do { return try read(&reader) } catch { throw FormatError("truncated") }
    }

    // MARK: Scalars

    /// One byte.
    public mutating func byte() throws(FormatError) -> UInt8 {
        try scalar { (reader) throws(ByteReader.Truncated) -> UInt8 in try reader.read() }
    }

    /// A byte that must be 0 or 1: any other value is refused rather than read as true, so that one
    /// value has one encoding.
    public mutating func flag() throws(FormatError) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw FormatError("a flag is neither 0 nor 1")
        }
    }

    /// A little-endian 32-bit unsigned integer.
    public mutating func unsigned() throws(FormatError) -> UInt32 {
        try scalar { (reader) throws(ByteReader.Truncated) -> UInt32 in try reader.read() }
    }

    /// A little-endian 64-bit unsigned integer.
    public mutating func unsigned64() throws(FormatError) -> UInt64 {
        try scalar { (reader) throws(ByteReader.Truncated) -> UInt64 in try reader.read() }
    }

    /// A little-endian 64-bit signed integer.
    public mutating func integer() throws(FormatError) -> Int64 {
        try scalar { (reader) throws(ByteReader.Truncated) -> Int64 in try reader.read() }
    }

    /// A Double from its little-endian 64-bit pattern (`value()` refuses NaN, which no query could mean).
    public mutating func double() throws(FormatError) -> Double {
        try scalar { (reader) throws(ByteReader.Truncated) -> Double in try reader.read() }
    }

    /// A date as seconds since 2001-01-01 00:00 UTC; a number that is not finite is refused.
    public mutating func date() throws(FormatError) -> Date {
        let seconds = try double()
        guard seconds.isFinite else { throw FormatError("a date is not a number") }
        return Date(timeIntervalSinceReferenceDate: seconds)
    }

    /// Exactly `count` bytes with no length before them (fixed-size fields).
    public mutating func raw(_ count: Int) throws(FormatError) -> Data {
        try scalar { (reader) throws(ByteReader.Truncated) -> Data in try reader.readRaw(count) }
    }

    /// A byte string after its 32-bit length.
    public mutating func bytes() throws(FormatError) -> Data {
        try scalar { (reader) throws(ByteReader.Truncated) -> Data in try reader.readBytes() }
    }

    /// A string after its 32-bit length; bytes that are not UTF-8 are refused, never repaired.
    public mutating func string() throws(FormatError) -> String {
        let string = try scalar { (reader) throws(ByteReader.Truncated) -> String? in try reader.readValidString() }
        guard let string else { throw FormatError("a string is not UTF-8") }
        return string
    }

    /// The count of a list, dictionary or array that follows, within the limit and the input left.
    public mutating func count() throws(FormatError) -> Int {
        let count = Int(try unsigned())
        guard count <= limits.maximumEntries else { throw FormatError("\(count) entries are over the limit") }
        guard count <= reader.remaining else { throw FormatError("\(count) entries in fewer bytes") }
        return count
    }

    /// A list of strings after its count.
    public mutating func strings() throws(FormatError) -> [String] {
        let count = try count()
        var values: [String] = []
        for _ in 0..<count { values.append(try string()) }
        return values
    }

    /// A secret, as `bytes` reads it, straight into wiped memory.
    public mutating func secret() throws(FormatError) -> SecureBytes {
        try scalar { (reader) throws(ByteReader.Truncated) -> SecureBytes in try reader.readSecureBytes() }
    }

    /// A flag, then the value `read` reads when the flag is 1.
    public mutating func optional<Value>(_ read: (inout ValueReader) throws(FormatError) -> Value)
        throws(FormatError) -> Value?
    {
        try flag() ? try read(&self) : nil
    }

    // MARK: The vocabulary

    /// A protection class by its `kSecAttrAccessible` name; an unknown name is refused.
    public mutating func protection() throws(FormatError) -> ProtectionClass {
        guard let protection = ProtectionClass(attributeValue: try string()) else {
            throw FormatError("unknown protection class")
        }
        return protection
    }

    /// An access control: its protection class, then its flag bits.
    public mutating func accessControl() throws(FormatError) -> AccessControlPolicy {
        let protection = try protection()
        guard let flags = UInt(exactly: try unsigned64()) else {
            throw FormatError("access-control flags out of range")
        }
        return AccessControlPolicy(protection: protection, flags: flags)
    }

    /// An authentication context: its 16-byte identifier and what it says of itself (the password
    /// goes straight into wiped memory).
    public mutating func context() throws(FormatError) -> AuthenticationContextReference {
        let identifier = try raw(16).withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
        return AuthenticationContextReference(
            identifier: identifier, interactionNotAllowed: try flag(),
            applicationPassword: try optional { (reader) throws(FormatError) in try reader.secret() },
            localizedReason: try optional { (reader) throws(FormatError) in try reader.string() })
    }

    /// A Security object reference: its kind by name, then its persistent reference if it has one.
    public mutating func reference() throws(FormatError) -> ValueReference {
        guard let kind = ValueReference.Kind(rawValue: try string()) else {
            throw FormatError("unknown value reference")
        }
        return ValueReference(
            kind: kind, persistentReference: try optional { (reader) throws(FormatError) in try reader.bytes() })
    }

    /// One value after its `ValueTag`, arrays to the depth the limits allow.
    public mutating func value() throws(FormatError) -> ItemValue { try value(depth: 0) }

    /// A dictionary: its count, then its entries in the writer's key order; a key out of order or
    /// repeated is refused, so that one dictionary has one encoding.
    public mutating func dictionary() throws(FormatError) -> [String: ItemValue] { try dictionary(depth: 0) }

    /// One query result after its `ResultTag`.
    public mutating func result() throws(FormatError) -> ItemResult { try result(depth: 0) }

    private mutating func value(depth: Int) throws(FormatError) -> ItemValue {
        guard depth < limits.maximumDepth else { throw FormatError("values nest too deeply") }
        try spend()
        let tag = try byte()
        guard let known = ValueTag(rawValue: tag) else { throw FormatError("unknown value \(tag)") }
        switch known {
        case .null: return .null
        case .string: return .string(try string())
        case .data: return .data(try bytes())
        case .secret: return .secret(try secret())
        case .integer: return .integer(try integer())
        case .double:
            // NaN equals nothing, not even itself: no query could mean it, and no answer holds one.
            let number = try double()
            guard !number.isNaN else { throw FormatError("a number is NaN") }
            return .double(number)
        case .date: return .date(try date())
        case .bool: return .bool(try flag())
        case .array:
            let count = try count()
            var values: [ItemValue] = []
            for _ in 0..<count { values.append(try value(depth: depth + 1)) }
            return .array(values)
        case .accessControl: return .accessControl(try accessControl())
        case .authenticationContext: return .authenticationContext(try context())
        case .valueReference: return .valueReference(try reference())
        case .unsupported: return .unsupported(try string())
        }
    }

    private mutating func dictionary(depth: Int) throws(FormatError) -> [String: ItemValue] {
        guard depth < limits.maximumDepth else { throw FormatError("values nest too deeply") }
        let count = try count()
        var values: [String: ItemValue] = [:]
        var previous: String?
        for _ in 0..<count {
            let key = try string()
            guard values[key] == nil else { throw FormatError("a key appears twice") }
            // In the writer's order only, so that one dictionary has one encoding.
            if let previous, key < previous { throw FormatError("keys out of order") }
            previous = key
            values[key] = try value(depth: depth + 1)
        }
        return values
    }

    private mutating func result(depth: Int) throws(FormatError) -> ItemResult {
        guard depth < limits.maximumDepth else { throw FormatError("results nest too deeply") }
        try spend()
        let tag = try byte()
        guard let known = ResultTag(rawValue: tag) else { throw FormatError("unknown result \(tag)") }
        switch known {
        case .data: return .data(try bytes())
        case .secret: return .secret(try secret())
        case .dictionary: return .dictionary(try dictionary(depth: depth + 1))
        case .array:
            let count = try count()
            var results: [ItemResult] = []
            for _ in 0..<count { results.append(try result(depth: depth + 1)) }
            return .array(results)
        }
    }
}
