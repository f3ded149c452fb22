import Foundation
import KeychainBytes
import KeychainCore
import Security

/// add-, find- and delete-generic-password and -internet-password, and dump-keychain.
struct PasswordVerbs {
    enum ItemKind {
        case generic, internet

        var className: String { self == .generic ? "genp" : "inet" }
        var verbSuffix: String { self == .generic ? "generic-password" : "internet-password" }
    }

    let kind: ItemKind
    let session: Session

    // Flags shared by add, find and delete, and what each sets.
    private var matchFlags: Set<Character> {
        kind == .generic
            ? ["a", "s", "l", "j", "D", "G", "c", "C"] : ["a", "s", "l", "j", "D", "c", "C", "d", "p", "P", "r", "t"]
    }

    /// The attributes a verb's match flags name, as the Security API takes them.
    private func attributes(from arguments: Arguments, verb: String) throws(Failure) -> [String: Any] {
        try itemAttributes(from: arguments, verb: verb).mapValues(\.bridged)
    }

    /// The attributes a verb's match flags name, as the keychain service takes them: Apple's raw keys
    /// and values (kSecAttrAccount is "acct"), so that a lookup can go to the service without the
    /// Core Foundation facade.
    private func itemAttributes(from arguments: Arguments, verb: String) throws(Failure) -> [String: ItemValue] {
        var query: [String: ItemValue] = ["class": .string(kind.className)]
        let strings: [(Character, String)] = [
            ("a", "acct"), ("s", kind == .generic ? "svce" : "srvr"), ("l", "labl"), ("j", "icmt"), ("D", "desc"),
        ]
        for (flag, key) in strings { if let value = arguments.attribute(flag) { query[key] = value } }
        if kind == .generic, let generic = arguments.bytes("G") { query["gena"] = .data(Data(generic)) }
        for (flag, key) in [(Character("c"), "crtr"), (Character("C"), "type")] {
            guard let code = arguments[flag] else { continue }
            guard let number = Self.fourCharacterCode(code) else {
                throw .usage(verb: verb, message: "-\(flag) needs a four-character code, not \"\(code)\"")
            }
            query[key] = .integer(Int64(number))
        }
        if kind == .internet {
            if let domain = arguments.attribute("d") { query["sdmn"] = domain }
            if let path = arguments.attribute("p") { query["path"] = path }
            if let port = arguments["P"] {
                guard let number = UInt16(port) else { throw .usage(verb: verb, message: "-P needs a port number") }
                query["port"] = .integer(Int64(number))
            }
            for (flag, key) in [(Character("r"), "ptcl"), (Character("t"), "atyp")] {
                guard let code = arguments[flag] else { continue }
                guard code.utf8.count == 4 else {
                    throw .usage(verb: verb, message: "-\(flag) needs a four-character code, not \"\(code)\"")
                }
                query[key] = .string(code)
            }
        }
        return query
    }

    /// `--synchronizable yes|no|any`: Apple's kSecAttrSynchronizable values (true, false,
    /// kSecAttrSynchronizableAny). Without it a find or delete matches only items that do not sync,
    /// as SecItemCopyMatching does.
    static func synchronizable(_ arguments: Arguments, verb: String) throws(Failure) -> Any? {
        try synchronizableValue(arguments, verb: verb)?.bridged
    }

    /// The same as the keychain service takes it.
    static func synchronizableValue(_ arguments: Arguments, verb: String) throws(Failure) -> ItemValue? {
        guard let value = arguments.value(long: "synchronizable") else { return nil }
        switch value {
        case "yes": return .bool(true)
        case "no": return .bool(false)
        case "any": return .string("syna")
        default: throw .usage(verb: verb, message: "--synchronizable takes yes, no or any, not \"\(value)\"")
        }
    }

    static func fourCharacterCode(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 4 else { return nil }
        return bytes.reduce(0) { $0 << 8 | Int($1) }
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
        let arguments: Arguments
        do {
            arguments = try Arguments(
                rawArguments, takingValue: matchFlags, booleans: ["g", "w"], long: ["json"],
                longTakingValue: ["access-group", "synchronizable"])
        } catch {
            throw .usage(verb: verb, message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.search)
        if arguments.has("w"), !arguments.has(long: "json") {
            // Only the password is printed (with -g too: -w prints it alone), so only the data is asked for:
            // an exact lookup then opens the secret alone and skips decoding the attributes. It goes to
            // the keychain service as it is, without the Security API's Core Foundation objects: the
            // lookup a script makes most, in a process that starts for it.
            var query = try itemAttributes(from: arguments, verb: verb)
            if let group = arguments.value(long: "access-group") { query["agrp"] = .string(group) }
            if let sync = try Self.synchronizableValue(arguments, verb: verb) { query["sync"] = sync }
            query["r_Data"] = .bool(true)
            query["m_Limit"] = .string("m_LimitOne")
            try session.findSecret(query, function: Function.search).withUnsafeBytes { secret in
                print(
                    ItemFormatter.isPrintable(secret)
                        ? String(decoding: secret, as: UTF8.self) : ItemFormatter.hex(secret))
            }
            return
        }
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
