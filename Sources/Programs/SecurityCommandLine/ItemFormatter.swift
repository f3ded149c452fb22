import Foundation
import Security
import SecurityCommandCore

/// Prints items as macOS's `security` does (the `keychain:` / `class:` / `attributes:` block), and as
/// JSON for scripts.
enum ItemFormatter {
    enum Kind: String {
        case blob, uint32, sint32, timedate
    }

    /// The attributes macOS lists for each class, in its order, with their display types.
    static func layout(for itemClass: String) -> [(String, Kind)] {
        switch itemClass {
        case "inet":
            [
                ("acct", .blob), ("atyp", .blob), ("cdat", .timedate), ("crtr", .uint32), ("cusi", .sint32),
                ("desc", .blob), ("icmt", .blob), ("invi", .sint32), ("mdat", .timedate), ("nega", .sint32),
                ("path", .blob), ("port", .uint32), ("prot", .blob), ("ptcl", .uint32), ("scrp", .sint32),
                ("sdmn", .blob), ("srvr", .blob), ("type", .uint32),
            ]
        case "genp":
            [
                ("acct", .blob), ("cdat", .timedate), ("crtr", .uint32), ("cusi", .sint32), ("desc", .blob),
                ("gena", .blob), ("icmt", .blob), ("invi", .sint32), ("mdat", .timedate), ("nega", .sint32),
                ("prot", .blob), ("scrp", .sint32), ("svce", .blob), ("type", .uint32),
            ]
        default:
            []
        }
    }

    static func block(itemClass: String, attributes: [String: Any], keychainPath: String) -> String {
        var lines = [
            "keychain: \"\(keychainPath)\"", "version: 512", "class: \"\(itemClass)\"", "attributes:",
            "    0x00000007 <blob>=" + value(attributes["labl"], kind: .blob),
            "    0x00000008 <blob>=<NULL>",
        ]
        var listed = layout(for: itemClass)
        if listed.isEmpty {
            listed = attributes.keys.sorted().filter { $0.count == 4 }.map { ($0, guessKind(attributes[$0])) }
        }
        for (name, kind) in listed {
            lines.append("    \"\(name)\"<\(kind.rawValue)>=" + value(attributes[name], kind: kind))
        }
        return lines.joined(separator: "\n")
    }

    private static func guessKind(_ value: Any?) -> Kind {
        switch value {
        case is Date: .timedate
        case is NSNumber: .sint32
        default: .blob
        }
    }

    static func value(_ value: Any?, kind: Kind) -> String {
        guard let value else { return "<NULL>" }
        switch kind {
        case .timedate:
            guard let date = value as? Date else { return "<NULL>" }
            let text = timestamp(date)
            let bytes = Data(text.utf8) + Data([0])
            return "0x" + hex(bytes) + "  \"" + text + "\\000\""
        case .uint32, .sint32:
            if let string = value as? String { return quoted(Data(string.utf8)) }
            guard let number = value as? NSNumber else { return "<NULL>" }
            let raw = UInt32(truncatingIfNeeded: number.int64Value)
            if kind == .uint32, let code = fourCharacterCode(raw) { return "\"\(code)\"" }
            return String(format: "0x%08X ", raw)
        case .blob:
            if let string = value as? String { return quoted(Data(string.utf8)) }
            if let data = value as? Data { return quoted(data) }
            if let number = value as? NSNumber { return quoted(Data(number.stringValue.utf8)) }
            return "<NULL>"
        }
    }

    /// `"text"` for printable bytes, else `0xHEX  "escaped"`, as macOS prints blobs and passwords.
    /// Built byte by byte over one contiguous buffer (data from the Security API may be backed by an
    /// `NSData`, whose per-byte access is slow): a secret of several megabytes prints in well under a
    /// second.
    static func quoted(_ data: Data) -> String {
        data.withUnsafeBytes { bytes in
            let quote = UInt8(ascii: "\"")
            let backslash = UInt8(ascii: "\\")
            var out: [UInt8] = []
            if isPrintable(bytes) {
                out.reserveCapacity(bytes.count + 2)
                out.append(quote)
                for byte in bytes {
                    if byte == quote || byte == backslash { out.append(backslash) }
                    out.append(byte)
                }
                out.append(quote)
                return String(decoding: out, as: UTF8.self)
            }
            out.reserveCapacity(bytes.count * 6 + 6)
            out += Array("0x".utf8)
            appendHex(bytes, to: &out)
            out += Array("  \"".utf8)
            for byte in bytes {
                switch byte {
                case quote, backslash: out += [backslash, byte]
                case 0x20..<0x7f: out.append(byte)
                default: out += [backslash, 0x30 + byte >> 6, 0x30 + (byte >> 3) & 7, 0x30 + byte & 7]
                }
            }
            out.append(quote)
            return String(decoding: out, as: UTF8.self)
        }
    }

    static func isPrintable(_ data: Data) -> Bool { data.withUnsafeBytes { SecretText.isPrintable($0) } }

    static func isPrintable(_ bytes: UnsafeRawBufferPointer) -> Bool { SecretText.isPrintable(bytes) }

    static func hex(_ data: Data) -> String { data.withUnsafeBytes { SecretText.hex($0) } }

    private static func appendHex(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        SecretText.appendHex(bytes, to: &out)
    }

    private static func timestamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMddHHmmss'Z'"
        return formatter.string(from: date)
    }

    static func fourCharacterCode(_ value: UInt32) -> String? {
        let bytes = [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
        guard value != 0, bytes.allSatisfy({ (0x20..<0x7f).contains($0) }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: JSON

    /// An item as a JSON object with Apple's attribute keys. Dates are ISO 8601; data that is UTF-8 text
    /// is a string, other data an object `{"hex": "..."}`.
    static func jsonObject(itemClass: String, attributes: [String: Any], data: Data?) -> [String: Any] {
        var object: [String: Any] = ["class": itemClass]
        for (key, value) in attributes where key != "v_Data" && key != "v_PersistentRef" && key != "class" {
            object[key] = jsonValue(value)
        }
        if let data { object["v_Data"] = jsonValue(data) }
        return object
    }

    private static func jsonValue(_ value: Any) -> Any {
        switch value {
        case let string as String: return string
        case let date as Date:
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter.string(from: date)
        case let data as Data:
            if let string = String(data: data, encoding: .utf8), isPrintable(data) || string.isEmpty { return string }
            return ["hex": hex(data)]
        case let number as NSNumber: return number
        default: return String(describing: value)
        }
    }

    /// JSON text safe for a terminal: JSONSerialization escapes C0 controls; DEL and C1 controls
    /// (U+0080–U+009F, CSI among them) are escaped here too.
    static func json(_ object: Any) -> String {
        guard
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        else { return "{}" }
        var text = String.UnicodeScalarView()
        for scalar in String(decoding: data, as: UTF8.self).unicodeScalars {
            if (0x7f...0x9f).contains(scalar.value) {
                text.append(contentsOf: String(format: "\\u%04x", scalar.value).unicodeScalars)
            } else {
                text.append(scalar)
            }
        }
        return String(text)
    }
}
