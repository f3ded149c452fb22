import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainStatus

/// `add-generic-password` and `add-internet-password`, made through the keychain service with Apple's
/// raw keys, as SecItemAdd (and SecItemUpdate, for -U) would make them: the lean `security` answers them
/// itself, and `security-full` with the same code.
extension PasswordItemKind {
    /// The options add- takes, parsed as macOS's getopt reads them.
    package func addArguments(_ rawArguments: [CommandArgument]) throws(Failure) -> Arguments {
        let takingValue = matchFlags.union(["X", "A", "g"]).union(self == .generic ? ["p"] : [])
        do {
            return try Arguments(rawArguments, takingValue: takingValue, optionalValue: ["w"], booleans: ["U", "S"])
        } catch {
            throw .usage(verb: "add-" + verbSuffix, message: error.message)
        }
    }

    /// Adds the item; with -U, an item that is there already (the same primary key) gets the new
    /// password and attributes instead.
    package func addPassword(_ arguments: Arguments, session: Session) throws(Failure) {
        let verb = "add-" + verbSuffix
        try session.checkKeychainNames(arguments.positional, function: Function.add)
        var item = try attributes(from: arguments, verb: verb)
        // The service (generic) or server (internet) names the item when no label is given.
        if item["labl"] == nil, let name = arguments.attribute("s") { item["labl"] = name }
        if let name = arguments["A"] {
            guard let protection = Self.accessibility[name.replacing("kSecAttrAccessible", with: "")] else {
                throw .usage(verb: verb, message: "unknown accessibility \"\(name)\"")
            }
            item["pdmn"] = .string(protection)
        }
        if let group = arguments["g"] { item["agrp"] = .string(group) }
        // -S: the item syncs to the account's other devices (kSecAttrSynchronizable).
        if arguments.has("S") { item["sync"] = .bool(true) }
        let secret = try password(arguments, verb: verb)
        var query = item
        query["v_Data"] = .secret(secret)
        do {
            _ = try session.callingService(function: Function.add) { try $0.add(query) }
        } catch .keychain(errSecDuplicateItem, _, _) where arguments.has("U") {
            // The primary key finds the item; what is not part of it is changed.
            var match = item
            for key in ["labl", "icmt", "desc", "gena", "crtr", "type", "pdmn"] { match[key] = nil }
            var changes = item
            for key in ["class", "acct", "svce", "srvr", "agrp"] { changes[key] = nil }
            changes["v_Data"] = .secret(secret)
            try session.callingService(function: Function.modify) { try $0.update(match, attributes: changes) }
        }
    }

    /// `-A` names (the kSecAttrAccessible constant names without their prefix) and their raw values.
    package static let accessibility: [String: String] = [
        "WhenUnlocked": "ak", "AfterFirstUnlock": "ck", "Always": "dk", "WhenUnlockedThisDeviceOnly": "aku",
        "AfterFirstUnlockThisDeviceOnly": "cku", "AlwaysThisDeviceOnly": "dku", "WhenPasscodeSetThisDeviceOnly": "akpu",
    ]

    /// The secret to store: `-w value`, `-p value` (generic only), `-X hex`; `-w` last prompts twice on a
    /// terminal or reads standard input otherwise; none at all stores an empty password.
    private func password(_ arguments: Arguments, verb: String) throws(Failure) -> SecureBytes {
        if let hex = arguments["X"] {
            guard let data = Hex.decode(hex.hasPrefix("0x") ? hex.dropFirst(2) : Substring(hex)) else {
                throw .usage(verb: verb, message: "-X needs hexadecimal data")
            }
            return SecureBytes(copying: data)
        }
        if let value = arguments.bytes("w") { return SecureBytes(copying: value) }
        if self == .generic, let value = arguments.bytes("p") { return SecureBytes(copying: value) }
        guard arguments.has("w") else { return SecureBytes(copying: [UInt8]()) }
        guard Terminal.inputIsTerminal else {
            switch Result(catching: { () throws(Terminal.InputProblem) in try Terminal.readStandardInput() }) {
            case .success(let secret): return secret
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
        return first
    }
}
