/// The first byte of an encoded `ItemValue`. These numbers are stored in every sealed item (a
/// record's attributes) and sent on the daemon's wire: a number, once given, keeps its meaning.
/// Stored attributes use only null to bool; the rest exist in queries and answers.
public enum ValueTag: UInt8, Sendable, CaseIterable {
    /// `ItemValue.null`: nothing follows.
    case null = 0
    /// A string: its 32-bit length, then UTF-8.
    case string = 1
    /// A byte string: its 32-bit length, then the bytes.
    case data = 2
    /// A little-endian 64-bit signed integer.
    case integer = 3
    /// A Double's little-endian 64-bit pattern (a NaN is refused).
    case double = 4
    /// Seconds since 2001-01-01 00:00 UTC (Core Foundation's reference date), as a Double.
    case date = 5
    /// A flag byte, 0 or 1.
    case bool = 6
    /// A count, then that many tagged values.
    case array = 7
    /// A protection class name and the flag bits.
    case accessControl = 8
    /// A context's identifier and what it says of itself.
    case authenticationContext = 9
    /// A Security object's kind and persistent reference, if it has one.
    case valueReference = 10
    /// The name of a type the keychain does not take, carried so that the error can name it.
    case unsupported = 11
    /// Bytes wiped when released (`ItemValue.secret`): the same layout as data.
    case secret = 12
}

/// The first byte of an encoded `ItemResult`.
public enum ResultTag: UInt8, Sendable, CaseIterable {
    /// `ItemResult.data`: a byte string.
    case data = 1
    /// `ItemResult.dictionary`: a dictionary of values.
    case dictionary = 2
    /// `ItemResult.array`: a count, then that many tagged results.
    case array = 3
    /// An item's data in wiped memory (`ItemResult.secret`): the same layout as data.
    case secret = 4
}

/// Why bytes did not decode: what the decoder met, never the bytes (they may be secret).
public struct FormatError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong, in words (a kind of value, a count), for logs and error answers.
    public let reason: String

    /// An error for `reason`, which must not quote the input.
    public init(_ reason: String) { self.reason = reason }

    /// The reason alone.
    public var description: String { reason }
}

/// How much one decoding may build, so that bytes from outside cannot make the decoder recurse or
/// allocate without bound.
public struct DecodingLimits: Sendable {
    /// Nesting of arrays, dictionaries and results.
    public var maximumDepth: Int
    /// Entries of one dictionary, array or list.
    public var maximumEntries: Int
    /// Values and results in the whole input, all told.
    public var maximumValues: Int
    /// What the input is, for messages ("frame", "record").
    public var input: String

    /// Limits for one kind of input; the daemon's frames set their own, sealed records use
    /// `authenticated`.
    public init(maximumDepth: Int, maximumEntries: Int, maximumValues: Int, input: String) {
        self.maximumDepth = maximumDepth
        self.maximumEntries = maximumEntries
        self.maximumValues = maximumValues
        self.input = input
    }

    /// For bytes this program wrote and authenticated (a sealed record): bounded by their length only.
    public static let authenticated = DecodingLimits(
        maximumDepth: 16, maximumEntries: .max, maximumValues: .max, input: "record")
}
