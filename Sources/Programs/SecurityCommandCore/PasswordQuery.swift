import FoundationEssentials
import KeychainBytes
import KeychainCore

/// The password items of add-, find- and delete-generic-password and -internet-password, and the
/// attributes their match flags name, as the keychain service takes them: Apple's raw keys and values
/// (kSecAttrAccount is "acct"), so that a lookup can go to the service without the Core Foundation
/// facade.
package enum PasswordItemKind: Sendable {
    case generic, internet

    package var className: String { self == .generic ? "genp" : "inet" }
    package var verbSuffix: String { self == .generic ? "generic-password" : "internet-password" }

    /// Flags shared by add, find and delete: each matches (or sets) one attribute.
    package var matchFlags: Set<Character> {
        self == .generic
            ? ["a", "s", "l", "j", "D", "G", "c", "C"] : ["a", "s", "l", "j", "D", "c", "C", "d", "p", "P", "r", "t"]
    }

    /// The attributes a verb's match flags name.
    package func attributes(from arguments: Arguments, verb: String) throws(Failure) -> [String: ItemValue] {
        var query: [String: ItemValue] = ["class": .string(className)]
        let strings: [(Character, String)] = [
            ("a", "acct"), ("s", self == .generic ? "svce" : "srvr"), ("l", "labl"), ("j", "icmt"), ("D", "desc"),
        ]
        for (flag, key) in strings { if let value = arguments.attribute(flag) { query[key] = value } }
        if self == .generic, let generic = arguments.bytes("G") { query["gena"] = .data(Data(generic)) }
        for (flag, key) in [(Character("c"), "crtr"), (Character("C"), "type")] {
            guard let code = arguments[flag] else { continue }
            guard let number = Self.fourCharacterCode(code) else {
                throw .usage(verb: verb, message: "-\(flag) needs a four-character code, not \"\(code)\"")
            }
            query[key] = .integer(Int64(number))
        }
        if self == .internet {
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
    package static func synchronizable(_ arguments: Arguments, verb: String) throws(Failure) -> ItemValue? {
        guard let value = arguments.value(long: "synchronizable") else { return nil }
        switch value {
        case "yes": return .bool(true)
        case "no": return .bool(false)
        case "any": return .string("syna")
        default: throw .usage(verb: verb, message: "--synchronizable takes yes, no or any, not \"\(value)\"")
        }
    }

    package static func fourCharacterCode(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 4 else { return nil }
        return bytes.reduce(0) { $0 << 8 | Int($1) }
    }

    /// The options find- takes, parsed as macOS's getopt reads them.
    package func findArguments(_ rawArguments: [CommandArgument]) throws(Failure) -> Arguments {
        do {
            return try Arguments(
                rawArguments, takingValue: matchFlags, booleans: ["g", "w"], long: ["json"],
                longTakingValue: ["access-group", "synchronizable"])
        } catch {
            throw .usage(verb: "find-" + verbSuffix, message: error.message)
        }
    }

    /// `find-*-password -w` without `--json`: prints the password alone (with -g too: -w prints it
    /// alone), so only the data is asked for: an exact lookup then opens the secret alone and skips
    /// decoding the attributes. It goes to the keychain service as it is, without the Security API's
    /// Core Foundation objects: the lookup a script makes most, in a process that starts for it.
    package func printPassword(_ arguments: Arguments, session: Session) throws(Failure) {
        let verb = "find-" + verbSuffix
        try session.checkKeychainNames(arguments.positional, function: Function.search)
        var query = try attributes(from: arguments, verb: verb)
        if let group = arguments.value(long: "access-group") { query["agrp"] = .string(group) }
        if let sync = try Self.synchronizable(arguments, verb: verb) { query["sync"] = sync }
        query["r_Data"] = .bool(true)
        query["m_Limit"] = .string("m_LimitOne")
        try session.findSecret(query, function: Function.search).withUnsafeBytes { secret in
            print(SecretText.isPrintable(secret) ? String(decoding: secret, as: UTF8.self) : SecretText.hex(secret))
        }
    }
}

/// How a secret is shown: as text when every character of it prints, else as hexadecimal (macOS's
/// `security` shows a password that is not text so).
package enum SecretText {
    /// Text that can go to a terminal as it is: valid UTF-8 without control characters, C0 (with ESC),
    /// DEL or C1 (U+0080–U+009F, which some terminals take as escape sequences: U+009B is CSI).
    package static func isPrintable(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) { return true }
        guard let string = String(validating: bytes, as: UTF8.self) else { return false }
        return string.unicodeScalars.allSatisfy { $0.value >= 0x20 && !(0x7f...0x9f).contains($0.value) }
    }

    package static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        appendHex(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// Upper-case hexadecimal digits of `bytes`, appended to `out`.
    package static func appendHex(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        for byte in bytes {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0f)])
        }
    }
}
