import FoundationEssentials

/// The lookup attributes of a freedesktop Secret Service item (`a{ss}`: `xdg:schema`, `application`,
/// `username`, …), kept with a keychain item as one value: the attribute `ssat`, whose bytes are this
/// type's encoding. Each pair gets its own keyed index entry, so a search for some of the pairs goes
/// through the index like any other attribute, and a query's map matches an item's when every pair of
/// the query is one of the item's.
public struct SecretServiceAttributes: Sendable, Hashable {
    /// The item attribute that holds the map.
    public static let attributeName = "ssat"
    /// The most pairs one map may have: a client cannot make the keychain store or index more than
    /// this per item.
    public static let maximumPairs = 256
    /// The longest key or value, in bytes of UTF-8.
    public static let maximumLength = 4_096

    /// The attributes, by name.
    public private(set) var pairs: [String: String]

    /// No attributes.
    public static let empty = SecretServiceAttributes(checked: [:])

    private init(checked pairs: [String: String]) { self.pairs = pairs }

    /// A map of at most `maximumPairs` pairs of at most `maximumLength` bytes each, without NUL
    /// characters (the D-Bus strings they come from have none); anything else is refused with a reason.
    public init(_ pairs: [String: String]) throws(FormatError) {
        guard pairs.count <= Self.maximumPairs else {
            throw FormatError("more than \(Self.maximumPairs) attributes")
        }
        for (key, value) in pairs {
            guard key.utf8.count <= Self.maximumLength, value.utf8.count <= Self.maximumLength else {
                throw FormatError("an attribute longer than \(Self.maximumLength) bytes")
            }
            guard !key.utf8.contains(0), !value.utf8.contains(0) else {
                throw FormatError("an attribute holds a NUL character")
            }
        }
        self.pairs = pairs
    }

    /// The pairs in key order: the order of the encoding and of index entries.
    public var sorted: [(key: String, value: String)] { pairs.sorted { $0.key < $1.key } }

    /// The map's one encoding: a count, then each key and value (32-bit length and UTF-8) in key order,
    /// so that equal maps encode to equal bytes.
    public var encoded: Data {
        var writer = ValueWriter(capacity: 8 + pairs.reduce(0) { $0 + 8 + $1.key.utf8.count + $1.value.utf8.count })
        writer.unsigned(UInt32(pairs.count))
        for (key, value) in sorted {
            writer.string(key)
            writer.string(value)
        }
        return writer.data
    }

    /// Reads an encoding back; bytes that are not one map in canonical order (or exceed the limits)
    /// are refused.
    public init(decoding data: Data) throws(FormatError) {
        var reader = ValueReader(
            data,
            limits: DecodingLimits(
                maximumDepth: 1, maximumEntries: Self.maximumPairs, maximumValues: 2 * Self.maximumPairs + 1,
                input: "attribute map"))
        let count = try reader.count()
        guard count <= Self.maximumPairs else { throw FormatError("more than \(Self.maximumPairs) attributes") }
        var pairs: [String: String] = [:]
        var previous: String?
        for _ in 0..<count {
            let key = try reader.string()
            let value = try reader.string()
            if let previous, !(previous < key) { throw FormatError("attributes out of order or repeated") }
            previous = key
            pairs[key] = value
        }
        try reader.finish()
        try self.init(pairs)
    }

    /// Whether every pair of `query` is one of this map's.
    public func contains(_ query: SecretServiceAttributes) -> Bool {
        query.pairs.allSatisfy { pairs[$0.key] == $0.value }
    }
}
