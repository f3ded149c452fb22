import Foundation
import KeychainKeybag

/// The `attributesToUpdate` dictionary of `SecItemUpdate`, validated: only attributes of the class and
/// `kSecValueData`; anything else is errSecNoSuchAttr, as on iOS.
struct ItemChange {
    var attributes: [String: ItemValue] = [:]
    var secret: Data?
    var accessGroup: String?
    var synchronizable: Bool?
    var protection: ProtectionClass?
    var accessControl: AccessControlPolicy?

    static func parse(_ dictionary: [String: ItemValue], itemClass: ItemClass) throws -> ItemChange {
        guard dictionary.count <= Query.maximumKeys else {
            throw KeychainError.invalidParameter("attributesToUpdate has more than \(Query.maximumKeys) keys")
        }
        var change = ItemChange()
        for key in dictionary.keys.sorted() {
            guard let value = dictionary[key] else { continue }
            if case .null = value { throw KeychainError.invalidParameter("the value for \(key) is null") }
            switch key {
            case "v_Data":
                guard case .data(let bytes) = value else {
                    throw KeychainError.invalidParameter("v_Data (kSecValueData) must be data, not \(value.typeName)")
                }
                change.secret = bytes
            case "agrp":
                guard case .string(let group) = value, !group.isEmpty else {
                    throw KeychainError.invalidParameter("agrp must be a non-empty string")
                }
                change.accessGroup = group
            case "sync":
                guard let flag = try AttributeCodec.synchronizable(value) else {
                    throw KeychainError.invalidParameter("kSecAttrSynchronizableAny cannot be set")
                }
                change.synchronizable = flag
            case "pdmn":
                guard case .string(let name) = value, let protection = ProtectionClass(attributeValue: name) else {
                    throw KeychainError.invalidParameter("pdmn (kSecAttrAccessible) is not a valid protection class")
                }
                change.protection = protection
            case "accc":
                guard case .accessControl(let policy) = value else {
                    throw KeychainError.invalidParameter("accc must be a SecAccessControl, not \(value.typeName)")
                }
                change.accessControl = policy
            case "musr", "nleg", "sha1", "tomb", "cdat", "mdat":
                break  // kept by the keychain itself
            case "ggrp", "clip":
                throw KeychainError.invalidParameter("\(key) cannot be updated")
            default:
                guard key.utf8.count == 4, let descriptor = AttributeSchema.descriptor(key, in: itemClass) else {
                    throw KeychainError.noSuchAttribute("\(key) is not an attribute of class \(itemClass.name)")
                }
                change.attributes[key] = try AttributeCodec.normalize(value, for: descriptor)
            }
        }
        if change.protection != nil, change.accessControl != nil {
            throw KeychainError.invalidParameter("conflicting kSecAttrAccessible and kSecAttrAccessControl")
        }
        if let policy = change.accessControl {
            guard ProtectionClass(attributeValue: policy.protection) != nil else {
                throw KeychainError.invalidParameter("the access control has an invalid protection class")
            }
            do {
                try Keychain.checkAccessControlSupported(
                    policy, synchronizable: change.synchronizable.map { .some($0) })
            } catch let error as KeychainError {
                throw error
            } catch {
                throw KeychainError.internalError("\(error)")
            }
        }
        return change
    }

    /// Applies the change; the modification date moves strictly forward.
    func apply(to record: inout ItemRecord, now: Date) throws {
        for (name, value) in attributes { record.attributes[name] = value }
        if let secret { record.secret = secret }
        if let accessGroup { record.accessGroup = accessGroup }
        if let synchronizable { record.synchronizable = synchronizable }
        if let protection {
            record.protection = protection
            record.accessControl = nil
        }
        if let accessControl, let protection = ProtectionClass(attributeValue: accessControl.protection) {
            record.protection = protection
            record.accessControl = accessControl
        }
        let previous = record.modificationDate
        let next = now > previous ? now : previous.addingTimeInterval(0.001)
        record.attributes["mdat"] = .date(next)
        try record.updateDigest()
    }
}
