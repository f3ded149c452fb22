import FoundationEssentials
import KeychainCore

/// How an attribute's values are typed, compared and indexed (after Apple's SecDb attribute kinds).
enum AttributeKind: Sendable {
    /// Keeps the caller's string or data; compared on the bytes, so "x" matches Data("x").
    case blob
    /// Bytes; a string is stored as its UTF-8.
    case data
    /// A number; booleans become 0/1 and decimal strings numbers; any other string stays a string
    /// (`kSecAttrProtocolHTTP` is "http").
    case number
    case date
    case string
    /// A Secret Service attribute map (`SecretServiceAttributes`' encoding): one index entry per pair,
    /// and a query's map matches an item's when each of its pairs is one of the item's.
    case attributeMap
}

struct AttributeDescriptor: Sendable {
    let name: String
    let kind: AttributeKind
}

/// Which attributes each class has, and which of them form its primary key.
enum AttributeSchema {
    // Attributes every class has. Bookkeeping ones (agrp, pdmn, sync, tomb, sha1, musr, accc) are
    // handled by the engine itself and listed in `managed`.
    private static let common: [AttributeDescriptor] = [
        .init(name: "cdat", kind: .date), .init(name: "mdat", kind: .date),
        .init(name: "labl", kind: .blob), .init(name: "alis", kind: .blob),
        .init(name: "vwht", kind: .string), .init(name: "tkid", kind: .string),
        .init(name: "UUID", kind: .string), .init(name: "sysb", kind: .number),
        .init(name: "pcss", kind: .number), .init(name: "pcsk", kind: .blob), .init(name: "pcsi", kind: .blob),
        .init(name: "clip", kind: .number), .init(name: "ggrp", kind: .string),
        .init(name: "sha1", kind: .data),
    ]

    private static let password: [AttributeDescriptor] = [
        .init(name: "desc", kind: .blob), .init(name: "icmt", kind: .blob),
        .init(name: "crtr", kind: .number), .init(name: "type", kind: .number),
        .init(name: "scrp", kind: .number), .init(name: "invi", kind: .number),
        .init(name: "nega", kind: .number), .init(name: "cusi", kind: .number),
        .init(name: "prot", kind: .blob), .init(name: "acct", kind: .blob),
    ]

    private static let genericOnly: [AttributeDescriptor] = [
        .init(name: "svce", kind: .blob), .init(name: "gena", kind: .blob),
        // Items of the Secret Service (docs/secret-service.md): its attribute map, its object id (part
        // of uniqueness, so that its items may share every other attribute), its collection and the
        // content type of its secret.
        .init(name: SecretServiceAttributes.attributeName, kind: .attributeMap),
        .init(name: "ssid", kind: .string), .init(name: "ssco", kind: .string), .init(name: "ssct", kind: .string),
    ]

    private static let internetOnly: [AttributeDescriptor] = [
        .init(name: "sdmn", kind: .blob), .init(name: "srvr", kind: .blob),
        .init(name: "ptcl", kind: .number), .init(name: "atyp", kind: .blob),
        .init(name: "port", kind: .number), .init(name: "path", kind: .blob),
    ]

    private static let certificateOnly: [AttributeDescriptor] = [
        .init(name: "ctyp", kind: .number), .init(name: "cenc", kind: .number),
        .init(name: "subj", kind: .data), .init(name: "issr", kind: .data),
        .init(name: "slnr", kind: .data), .init(name: "skid", kind: .data),
        .init(name: "pkhh", kind: .data),
    ]

    private static let keyOnly: [AttributeDescriptor] =
        [
            .init(name: "kcls", kind: .number), .init(name: "klbl", kind: .data),
            .init(name: "atag", kind: .blob), .init(name: "crtr", kind: .number),
            .init(name: "type", kind: .number), .init(name: "bsiz", kind: .number),
            .init(name: "esiz", kind: .number), .init(name: "sdat", kind: .date),
            .init(name: "edat", kind: .date),
        ]
        + [
            "perm", "priv", "modi", "sens", "asen", "extr", "next", "encr", "decr", "drve", "sign", "vrfy", "snrc",
            "vyrc", "wrap", "unwp",
        ].map { AttributeDescriptor(name: $0, kind: .number) }

    /// Attributes the engine sets or interprets itself rather than storing as given.
    static let managed: Set<String> = ["agrp", "pdmn", "sync", "tomb", "musr", "accc", "nleg"]

    private static let tables: [ItemClass: [String: AttributeDescriptor]] = {
        func table(_ lists: [AttributeDescriptor]...) -> [String: AttributeDescriptor] {
            var result: [String: AttributeDescriptor] = [:]
            for list in lists { for descriptor in list { result[descriptor.name] = descriptor } }
            return result
        }
        return [
            .genericPassword: table(common, password, genericOnly),
            .internetPassword: table(common, password, internetOnly),
            .certificate: table(common, certificateOnly),
            .key: table(common, keyOnly),
        ]
    }()

    /// The class-specific primary key, in digest order. Access group and synchronizable complete it
    /// for every class, and view hint and token id for uniqueness only (see `ItemDigests`).
    static func primaryKey(_ itemClass: ItemClass) -> [String] {
        switch itemClass {
        case .genericPassword: genericPrimaryKey
        case .internetPassword: internetPrimaryKey
        case .certificate: certificatePrimaryKey
        case .key: keyPrimaryKey
        }
    }

    // Stored once: the lookup path asks for these on every query.
    private static let genericPrimaryKey = ["acct", "svce"]
    private static let internetPrimaryKey = ["acct", "sdmn", "srvr", "ptcl", "atyp", "port", "path"]
    private static let certificatePrimaryKey = ["ctyp", "issr", "slnr"]
    private static let keyPrimaryKey = ["kcls", "klbl", "atag", "crtr", "type", "bsiz", "esiz", "sdat", "edat"]

    /// Part of uniqueness but absent from most queries, so kept out of the lookup digest.
    static let uniquenessOnly = ["vwht", "tkid"]
    /// Part of uniqueness when present, so that rows written without it keep their digests: a Secret
    /// Service item's object id.
    static let uniquenessWhenPresent = "ssid"

    static func descriptor(_ name: String, in itemClass: ItemClass) -> AttributeDescriptor? {
        tables[itemClass]?[name]
    }

    /// Whether `name` is an attribute of the class at all (stored or managed).
    static func isAttribute(_ name: String, of itemClass: ItemClass) -> Bool {
        managed.contains(name) || descriptor(name, in: itemClass) != nil
    }

    /// The value a primary-key attribute has when the caller gave none ("" or 0, as Apple's columns default).
    static func defaultValue(for descriptor: AttributeDescriptor) -> ItemValue {
        switch descriptor.kind {
        case .blob, .string: .string("")
        case .data: .data(Data())
        case .number: .integer(0)
        case .date: .date(Date(timeIntervalSinceReferenceDate: 0))
        case .attributeMap: .data(SecretServiceAttributes.empty.encoded)
        }
    }
}
