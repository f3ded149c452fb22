import Foundation
import KeychainBytes
import KeychainCore
import Security
import SecurityCommandCore

/// add-, find- and delete-generic-password and -internet-password, and dump-keychain.
struct PasswordVerbs {
    typealias ItemKind = PasswordItemKind

    let kind: ItemKind
    let session: Session

    private var matchFlags: Set<Character> { kind.matchFlags }

    /// The attributes a verb's match flags name, as the Security API takes them.
    private func attributes(from arguments: Arguments, verb: String) throws(Failure) -> [String: Any] {
        try kind.attributes(from: arguments, verb: verb).mapValues(\.bridged)
    }

    /// `--synchronizable yes|no|any` as the Security API takes it (see `PasswordItemKind`).
    static func synchronizable(_ arguments: Arguments, verb: String) throws(Failure) -> Any? {
        try PasswordItemKind.synchronizable(arguments, verb: verb)?.bridged
    }

    // MARK: add

    func add(_ rawArguments: [CommandArgument]) throws(Failure) {
        // Through the keychain service, as the command's lean half adds.
        try kind.addPassword(try kind.addArguments(rawArguments), session: session)
    }

    // MARK: find

    func find(_ rawArguments: [CommandArgument]) throws(Failure) {
        let verb = "find-" + kind.verbSuffix
        let arguments = try kind.findArguments(rawArguments)
        if arguments.has("w"), !arguments.has(long: "json") {
            // The password alone, without the Security API (as the command's lean half answers it).
            try kind.printPassword(arguments, session: session)
            return
        }
        try session.checkKeychainNames(arguments.positional, function: Function.search)
        var query = try attributes(from: arguments, verb: verb)
        if let group = arguments.value(long: "access-group") { query[kSecAttrAccessGroup as String] = group }
        if let sync = try Self.synchronizable(arguments, verb: verb) { query[kSecAttrSynchronizable as String] = sync }
        let wantsPassword = arguments.has("g") || arguments.has("w")
        query[kSecReturnAttributes as String] = true
        query[kSecReturnPersistentRef as String] = wantsPassword
        let found = try copyMatching(query, as: [String: Any].self)
        let secret = wantsPassword ? try session.secret(of: found) : nil
        if arguments.has(long: "json") {
            print(
                ItemFormatter.json(
                    ItemFormatter.jsonObject(
                        itemClass: kind.className, attributes: found, data: wantsPassword ? secret ?? Data() : nil)))
            return
        }
        print(ItemFormatter.block(itemClass: kind.className, attributes: found, keychainPath: session.databasePath))
        if arguments.has("g") {
            FileHandle.standardError.write(Data(("password: " + ItemFormatter.quoted(secret ?? Data()) + "\n").utf8))
        }
    }

    /// The first item the query matches, as the type its return keys ask for.
    private func copyMatching<Result>(_ query: [String: Any], as: Result.Type) throws(Failure) -> Result {
        var matching = query
        matching[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = try session.retryingWhenLocked { SecItemCopyMatching(matching as CFDictionary, &result) }
        guard status == errSecSuccess, let found = result as? Result else {
            throw .keychain(status == errSecSuccess ? errSecItemNotFound : status, function: Function.search)
        }
        return found
    }

    // MARK: delete

    func delete(_ rawArguments: [CommandArgument]) throws(Failure) {
        let verb = "delete-" + kind.verbSuffix
        let arguments: Arguments
        do {
            arguments = try Arguments(
                rawArguments, takingValue: matchFlags, longTakingValue: ["access-group", "synchronizable"])
        } catch {
            throw .usage(verb: verb, message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.search)
        var query = try attributes(from: arguments, verb: verb)
        if let group = arguments.value(long: "access-group") { query[kSecAttrAccessGroup as String] = group }
        if let sync = try Self.synchronizable(arguments, verb: verb) { query[kSecAttrSynchronizable as String] = sync }
        query[kSecReturnAttributes as String] = true
        query[kSecReturnPersistentRef as String] = true
        var result: CFTypeRef?
        var status = try session.retryingWhenLocked { SecItemCopyMatching(query as CFDictionary, &result) }
        guard status == errSecSuccess, let found = result as? [String: Any],
            let reference = found[kSecValuePersistentRef as String] as? Data
        else { throw .keychain(status == errSecSuccess ? errSecItemNotFound : status, function: Function.search) }
        // Like macOS, one item per call: the first match.
        status = try session.retryingWhenLocked {
            SecItemDelete([kSecValuePersistentRef as String: reference] as CFDictionary)
        }
        guard status == errSecSuccess else { throw .keychain(status, function: Function.delete) }
        print(ItemFormatter.block(itemClass: kind.className, attributes: found, keychainPath: session.databasePath))
        print("password has been deleted.")
    }
}

/// dump-keychain: every password item the caller can see, in the block layout or as JSON.
struct DumpVerb {
    let session: Session

    func run(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(
                rawArguments, takingValue: [], booleans: ["d", "a", "r"], long: ["json"],
                longTakingValue: ["synchronizable"])
        } catch {
            throw .usage(verb: "dump-keychain", message: error.message)
        }
        // Every item by default; --synchronizable yes or no keeps those that sync, or those that do not.
        let sync = try PasswordVerbs.synchronizable(arguments, verb: "dump-keychain") ?? kSecAttrSynchronizableAny
        try session.checkKeychainNames(arguments.positional, function: Function.search)
        let withData = arguments.has("d")
        var objects: [[String: Any]] = []
        var blocks: [String] = []
        for (itemClass, name) in [
            (kSecClassGenericPassword, "genp"), (kSecClassInternetPassword, "inet"), (kSecClassCertificate, "cert"),
            (kSecClassKey, "keys"),
        ] {
            let items = try session.allItems(
                of: itemClass,
                returning: [
                    kSecReturnAttributes as String: true, kSecReturnPersistentRef as String: withData,
                    kSecAttrSynchronizable as String: sync,
                ],
                as: [String: Any].self, function: Function.search)
            for var item in items {
                let data = withData ? try session.secret(of: item) ?? Data() : nil
                item[kSecValuePersistentRef as String] = nil
                objects.append(ItemFormatter.jsonObject(itemClass: name, attributes: item, data: data))
                var block = ItemFormatter.block(itemClass: name, attributes: item, keychainPath: session.databasePath)
                if let data { block += "\ndata:\n" + ItemFormatter.quoted(data) }
                blocks.append(block)
            }
        }
        if arguments.has(long: "json") {
            print(ItemFormatter.json(objects))
        } else if !blocks.isEmpty {
            print(blocks.joined(separator: "\n"))
        }
    }
}

extension ItemValue {
    /// The object the Security API takes for this value.
    var bridged: Any { ValueBridging.object(self) ?? NSNull() }
}
