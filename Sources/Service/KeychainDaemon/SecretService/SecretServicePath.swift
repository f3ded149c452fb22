import Foundation
import KeychainBytes

/// The Secret Service's object paths, and what each names.
enum SecretServicePath {
    static let service = "/org/freedesktop/secrets"
    static let collectionPrefix = "/org/freedesktop/secrets/collection/"
    static let aliasPrefix = "/org/freedesktop/secrets/aliases/"
    static let sessionPrefix = "/org/freedesktop/secrets/session/"
    static let promptPrefix = "/org/freedesktop/secrets/prompt/"
    /// "No prompt is needed" (and "no object").
    static let none = "/"

    enum Object: Equatable {
        case service
        /// A collection by its id, named by its own path or through an alias.
        case collection(String)
        /// An item: its collection's id and its persistent reference.
        case item(collection: String, reference: Data)
        case session(String)
        case prompt(String)
        case unknown
    }

    static func collection(_ id: String) -> String { collectionPrefix + id }

    static func item(collection: String, reference: Data) -> String {
        collectionPrefix + collection + "/i" + Hex.encode(reference)
    }

    /// What `path` names; aliases are resolved through `aliases`.
    static func parse(_ path: String, aliases: [String: String]) -> Object {
        if path == service { return .service }
        if path.hasPrefix(sessionPrefix) { return .session(path) }
        if path.hasPrefix(promptPrefix) { return .prompt(path) }
        var rest: Substring
        var collection: String
        if path.hasPrefix(aliasPrefix) {
            rest = path.dropFirst(aliasPrefix.count)
            let alias = rest.prefix { $0 != "/" }
            guard let target = aliases[String(alias)] else { return .unknown }
            collection = target
            rest = rest.dropFirst(alias.count)
        } else if path.hasPrefix(collectionPrefix) {
            rest = path.dropFirst(collectionPrefix.count)
            let id = rest.prefix { $0 != "/" }
            guard isElement(id) else { return .unknown }
            collection = String(id)
            rest = rest.dropFirst(id.count)
        } else {
            return .unknown
        }
        if rest.isEmpty { return .collection(collection) }
        guard rest.first == "/", rest.dropFirst().first == "i",
            let reference = Hex.decode(String(rest.dropFirst(2))), !reference.isEmpty
        else { return .unknown }
        return .item(collection: collection, reference: reference)
    }

    /// Whether `text` is one element of an object path (letters, digits and `_`).
    static func isElement<Text: StringProtocol>(_ text: Text) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x5f
            }
    }
}
