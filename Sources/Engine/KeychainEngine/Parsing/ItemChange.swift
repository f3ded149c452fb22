import FoundationEssentials
import KeychainKeybag

/// The `attributesToUpdate` dictionary of `SecItemUpdate`, validated: only attributes of the class and
/// `kSecValueData`; anything else is errSecNoSuchAttr, as on iOS.
struct ItemChange {
    var attributes: [String: ItemValue] = [:]
    /// The secret, access group, synchronizable, protection class and access control, by the same rules
    /// as a query's.
    var shared = SharedAttributes()

    static func parse(_ dictionary: [String: ItemValue], itemClass: ItemClass) throws -> ItemChange {
        try SharedAttributes.checkSize(dictionary, name: "attributesToUpdate")
        var change = ItemChange()
        for key in dictionary.keys.sorted() {
            guard let value = dictionary[key] else { continue }
            try SharedAttributes.checkNotNull(key, value)
            if try change.shared.take(key, value) { continue }
            switch key {
            case "musr", "nleg", "sha1", "tomb", "cdat", "mdat":
                break  // kept by the keychain itself
            case "ggrp", "clip", "tkid":
                throw KeychainError.invalidParameter("\(key) cannot be updated")
            default:
                guard key.utf8.count == 4, let descriptor = AttributeSchema.descriptor(key, in: itemClass) else {
                    throw KeychainError.noSuchAttribute("\(key) is not an attribute of class \(itemClass.name)")
                }
                change.attributes[key] = try AttributeCodec.normalize(value, for: descriptor)
            }
        }
        if change.shared.synchronizable == .any {
            throw KeychainError.invalidParameter("kSecAttrSynchronizableAny cannot be set")
        }
        try change.shared.validate()
        try change.shared.checkAccessControlForWriting(synchronizable: change.synchronizable)
        return change
    }

    /// The synchronizable flag the change sets, if any.
    var synchronizable: Bool? { shared.synchronizable.map { $0 == .yes } }

    /// Applies the change; the modification date moves strictly forward.
    /// What an enclave key keeps from its making: its data, what the key is and may do, its protection
    /// and access control; and it never synchronizes.
    private static let enclaveKeyFixed = [
        "kcls", "type", "bsiz", "esiz", "klbl", "perm", "priv", "modi", "sens", "asen", "extr", "next", "encr", "decr",
        "drve", "sign", "vrfy", "snrc", "vyrc", "wrap", "unwp",
    ]

    /// Refuses a change that the record cannot take (checked before anyone is asked to allow it).
    func checkApplicable(to record: ItemRecord) throws {
        guard record.enclavePublicKey != nil else { return }
        let fixed = Self.enclaveKeyFixed.filter { attributes[$0] != nil }
        if shared.secret != nil || shared.protection != nil || shared.accessControl != nil || !fixed.isEmpty
            || synchronizable == true
        {
            throw KeychainError.invalidParameter(
                "an enclave key's data, key attributes, protection and access control are fixed when it is made, and it never synchronizes"
            )
        }
    }

    func apply(to record: inout ItemRecord, now: Date) throws {
        try checkApplicable(to: record)
        for (name, value) in attributes { record.attributes[name] = value }
        if let secret = shared.secret { record.secret = secret }
        if let accessGroup = shared.accessGroup { record.accessGroup = accessGroup }
        if let synchronizable { record.synchronizable = synchronizable }
        if let protection = shared.protection {
            record.protection = protection
            record.accessControl = nil
        }
        if let accessControl = shared.accessControl {
            record.protection = accessControl.protection
            record.accessControl = accessControl
        }
        let previous = record.modificationDate
        let next = now > previous ? now : previous.addingTimeInterval(0.001)
        record.attributes["mdat"] = .date(next)
        if record.synchronizable, record.accessControl?.flags ?? 0 != 0 {
            throw KeychainError.invalidParameter("an item with kSecAttrAccessControl cannot be synchronizable")
        }
        try record.updateDigest()
    }
}
