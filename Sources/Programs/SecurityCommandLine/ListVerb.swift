import Foundation
import Security
import SecurityCommandCore

/// `list-items [--json]` (beyond macOS): every item the caller can see, one line each, without
/// secrets: what dump-keychain shows in some twenty lines an item, cut to what tells items apart.
struct ListVerb {
    let session: Session

    /// The attributes shown, in order, with their names on a line (the server stands for the service of
    /// an internet password).
    private static var columns: [(name: String, keys: [String])] {
        [
            ("service", [kSecAttrService as String, kSecAttrServer as String]),
            ("account", [kSecAttrAccount as String]),
            ("label", [kSecAttrLabel as String]),
        ]
    }

    func run(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: [], long: ["json"])
        } catch {
            throw .usage(verb: "list-items", message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.search)
        var objects: [[String: Any]] = []
        var lines: [String] = []
        for (itemClass, name) in [
            (kSecClassGenericPassword, "genp"), (kSecClassInternetPassword, "inet"), (kSecClassCertificate, "cert"),
            (kSecClassKey, "keys"),
        ] {
            let items = try session.allItems(
                of: itemClass, returning: [kSecReturnAttributes as String: true], as: [String: Any].self,
                function: Function.search)
            for item in items {
                let keys = Self.columns.flatMap(\.keys) + [kSecAttrAccessGroup as String]
                let shown = item.filter { keys.contains($0.key) }
                objects.append(ItemFormatter.jsonObject(itemClass: name, attributes: shown, data: nil))
                var fields = ["class=\(name)"]
                for (column, keys) in Self.columns {
                    // Quoted as the attribute blocks quote (hex and escapes for what is not printable text):
                    // no attribute writes to the terminal.
                    let value = keys.lazy.compactMap { item[$0] }.first
                    fields.append("\(column)=" + ItemFormatter.value(value, kind: .blob))
                }
                fields.append("group=" + ItemFormatter.value(item[kSecAttrAccessGroup as String], kind: .blob))
                lines.append(fields.joined(separator: " "))
            }
        }
        if arguments.has(long: "json") {
            print(ItemFormatter.json(objects))
        } else if !lines.isEmpty {
            print(lines.joined(separator: "\n"))
        }
    }
}
