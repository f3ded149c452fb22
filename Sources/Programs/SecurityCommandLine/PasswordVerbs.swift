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
        let verb = "add-" + kind.verbSuffix
        let takingValue = matchFlags.union(["X", "A", "g"]).union(kind == .generic ? ["p"] : [])
        let arguments: Arguments
        do {
            arguments = try Arguments(
                rawArguments, takingValue: takingValue, optionalValue: ["w"], booleans: ["U", "S"])
        } catch {
            throw .usage(verb: verb, message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.add)
        var item = try attributes(from: arguments, verb: verb)
        if item[kSecAttrLabel as String] == nil {
            // The service (generic) or server (internet) names the item when no label is given.
            if let name = arguments.attribute("s") { item[kSecAttrLabel as String] = name.bridged }
        }
        if let name = arguments["A"] {
            guard let protection = Self.accessibility[name.replacingOccurrences(of: "kSecAttrAccessible", with: "")]
            else {
                throw .usage(verb: verb, message: "unknown accessibility \"\(name)\"")
            }
            item[kSecAttrAccessible as String] = protection
        }
        if let group = arguments["g"] { item[kSecAttrAccessGroup as String] = group }
        // -S: the item syncs to the account's other devices (kSecAttrSynchronizable).
        if arguments.has("S") { item[kSecAttrSynchronizable as String] = true }
        let secret = try password(arguments, verb: verb)
        var query = item
        query[kSecValueData as String] = secret

        var status = try session.retryingWhenLocked { SecItemAdd(query as CFDictionary, nil) }
        if status == errSecDuplicateItem, arguments.has("U") {
            var match = item
            for key in [
                kSecAttrLabel, kSecAttrComment, kSecAttrDescription, kSecAttrGeneric, kSecAttrCreator, kSecAttrType,
                kSecAttrAccessible,
            ] {
                match[key as String] = nil
            }
            var changes = item
            for key in [kSecClass, kSecAttrAccount, kSecAttrService, kSecAttrServer, kSecAttrAccessGroup] {
                changes[key as String] = nil
            }
            changes[kSecValueData as String] = secret
            status = try session.retryingWhenLocked { SecItemUpdate(match as CFDictionary, changes as CFDictionary) }
            guard status == errSecSuccess else { throw .keychain(status, function: Function.modify) }
            return
        }
        guard status == errSecSuccess else { throw .keychain(status, function: Function.add) }
    }

    /// `-A` names (the kSecAttrAccessible constant names without their prefix) and their raw values.
    static let accessibility: [String: String] = [
        "WhenUnlocked": "ak", "AfterFirstUnlock": "ck", "Always": "dk", "WhenUnlockedThisDeviceOnly": "aku",
        "AfterFirstUnlockThisDeviceOnly": "cku", "AlwaysThisDeviceOnly": "dku", "WhenPasscodeSetThisDeviceOnly": "akpu",
    ]

    /// The secret to store: `-w value`, `-p value` (generic only), `-X hex`; `-w` last prompts twice on a
    /// terminal or reads standard input otherwise; none at all stores an empty password.
    private func password(_ arguments: Arguments, verb: String) throws(Failure) -> Data {
        if let hex = arguments["X"] {
            guard let data = Self.data(hex: hex) else { throw .usage(verb: verb, message: "-X needs hexadecimal data") }
            return data
        }
        if let value = arguments.bytes("w") { return Data(value) }
        if kind == .generic, let value = arguments.bytes("p") { return Data(value) }
        guard arguments.has("w") else { return Data() }
        guard Terminal.inputIsTerminal else {
            switch Result(catching: { () throws(Terminal.InputProblem) in try Terminal.readStandardInput() }) {
            case .success(let data): return data
            case .failure(.tooLarge):
                throw .message("the password on standard input is larger than \(Terminal.maximumInput >> 20) MiB")
            case .failure(.unreadable(let reason)):
                throw .message("cannot read the password from standard input: \(reason)")
            }
        }
        guard let first = Terminal.readSecret(prompt: "password data for new item: "),
            let second = Terminal.readSecret(prompt: "retype password for new item: ")
        else { throw .message("no password was entered") }
        guard first.constantTimeEquals(second) else { throw .message("passwords don't match") }
        return first.withUnsafeBytes { Data($0) }
    }

    static func data(hex: String) -> Data? {
        Hex.decode(hex.hasPrefix("0x") ? hex.dropFirst(2) : Substring(hex))
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
