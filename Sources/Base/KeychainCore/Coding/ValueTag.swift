/// The first byte of an encoded `ItemValue`. These numbers are stored in every sealed item (a
/// record's attributes) and sent on the daemon's wire: a number, once given, keeps its meaning.
/// Stored attributes use only null to bool; the rest exist in queries and answers.
public enum ValueTag: UInt8, Sendable, CaseIterable {
    case null = 0
    case string = 1
    case data = 2
    case integer = 3
    case double = 4
    /// Seconds since 2001-01-01 00:00 UTC (Core Foundation's reference date), as a Double.
    case date = 5
    case bool = 6
    case array = 7
    case accessControl = 8
    case authenticationContext = 9
    case valueReference = 10
    case unsupported = 11
}

/// The first byte of an encoded `ItemResult`.
public enum ResultTag: UInt8, Sendable, CaseIterable {
    case data = 1
    case dictionary = 2
    case array = 3
}

/// Why bytes did not decode: what the decoder met, never the bytes (they may be secret).
public struct FormatError: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

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
