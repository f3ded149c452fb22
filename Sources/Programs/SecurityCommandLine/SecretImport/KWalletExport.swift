import Foundation
import KeychainBytes
import KeychainCore
import SecurityCommandCore

/// A wallet exported by KWallet Manager as XML ("Export as XML"): `<wallet name>` holding `<folder
/// name>`s, each holding `<password name>` (text), `<map name>` (`<mapentry name>` texts) and `<stream
/// name>` (base64) entries. The export is in the clear, which is why KWallet Manager asks before it
/// writes one; the `.kwl` file itself (Blowfish or GPG) is not read.
///
/// Each entry becomes a secret with the attributes `kwallet.folder`, `kwallet.key` and
/// `kwallet.type` (password, map, stream), labelled with its key; a map's secret is its entries as a
/// JSON object, a stream's its bytes. The wallet `kdewallet` (KWallet's default) goes to the default
/// collection, any other to the collection of its name.
///
/// Only that document is read, strictly, by the small reader below: five elements with one `name`
/// attribute each, text, the five predefined entities and character references, comments, an XML
/// declaration and a doctype. Anything else is refused with what and where.
enum KWalletExport {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func read(_ data: Data) throws(Failure) -> [ImportedSecret] {
        guard let text = String(data: data, encoding: .utf8) else { throw Failure("the export is not UTF-8") }
        var parser = Parser(text: Array(text.unicodeScalars))
        let wallet = try parser.document()
        guard wallet.name == "wallet" else { throw Failure("the document is a <\(wallet.name)>, not a <wallet>") }
        let walletName = try wallet.attribute("name")
        let collection = walletName == "kdewallet" ? "" : walletName
        var secrets: [ImportedSecret] = []
        for folder in wallet.children {
            guard folder.name == "folder" else { throw Failure("a <\(folder.name)> in the wallet, not a <folder>") }
            let folderName = try folder.attribute("name")
            for entry in folder.children {
                let key = try entry.attribute("name")
                var attributes = ["kwallet.folder": folderName, "kwallet.key": key, "kwallet.type": entry.name]
                let secret: SecureBytes
                var contentType = "text/plain"
                switch entry.name {
                case "password":
                    secret = SecureBytes(copying: Array(entry.text.utf8))
                case "map":
                    var map: [String: String] = [:]
                    for item in entry.children {
                        guard item.name == "mapentry" else { throw Failure("a <\(item.name)> in a map") }
                        map[try item.attribute("name")] = item.text
                    }
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = .sortedKeys
                    guard let json = try? encoder.encode(map) else { throw Failure("a map that cannot be written") }
                    secret = SecureBytes(copying: json)
                    contentType = "application/json"
                case "stream":
                    guard let bytes = Data(base64Encoded: entry.text, options: .ignoreUnknownCharacters) else {
                        throw Failure("the stream \(key) is not base64")
                    }
                    secret = SecureBytes(copying: bytes)
                    contentType = "application/octet-stream"
                default:
                    throw Failure("a <\(entry.name)> in the folder \(folderName)")
                }
                if entry.name != "map", !entry.children.isEmpty {
                    throw Failure("elements inside the \(entry.name) \(key)")
                }
                attributes["kwallet.type"] = entry.name
                secrets.append(
                    ImportedSecret(
                        collection: collection, label: key, attributes: attributes, secret: secret,
                        contentType: contentType))
            }
        }
        return secrets
    }

    /// One element: its name, attributes, text and child elements.
    struct Element {
        var name: String
        var attributes: [String: String] = [:]
        var text = ""
        var children: [Element] = []

        func attribute(_ key: String) throws(Failure) -> String {
            guard let value = attributes[key] else { throw Failure("a <\(name)> without its \(key)") }
            return value
        }
    }

    /// The strict reader of the export's XML.
    struct Parser {
        let text: [Unicode.Scalar]
        var position = 0
        /// Deeper than any export (wallet, folder, map, entry).
        static let maximumDepth = 8

        init(text: [Unicode.Scalar]) { self.text = text }

        private func failure(_ what: String) -> Failure {
            let line = text[..<min(position, text.count)].filter { $0 == "\n" }.count + 1
            return Failure("\(what) (line \(line))")
        }

        private func starts(with literal: String) -> Bool {
            let scalars = Array(literal.unicodeScalars)
            return position + scalars.count <= text.count
                && Array(text[position..<(position + scalars.count)]) == scalars
        }

        private mutating func skip(past literal: String) throws(Failure) {
            while position < text.count, !starts(with: literal) { position += 1 }
            guard starts(with: literal) else { throw failure("\(literal) never comes") }
            position += literal.unicodeScalars.count
        }

        private mutating func skipSpace() {
            while position < text.count, [" ", "\n", "\r", "\t"].contains(text[position]) { position += 1 }
        }

        /// Declarations, doctype and comments before the root, the root, then nothing but space and comments.
        mutating func document() throws(Failure) -> Element {
            while true {
                skipSpace()
                if starts(with: "<?") {
                    try skip(past: "?>")
                } else if starts(with: "<!--") {
                    try skip(past: "-->")
                } else if starts(with: "<!DOCTYPE") {
                    try skip(past: ">")
                } else {
                    break
                }
            }
            let root = try element(depth: 0)
            while true {
                skipSpace()
                guard starts(with: "<!--") else { break }
                try skip(past: "-->")
            }
            guard position == text.count else { throw failure("something after the document") }
            return root
        }

        private mutating func name() throws(Failure) -> String {
            var name = ""
            while position < text.count,
                text[position].properties.isAlphabetic || ("0"..."9").contains(text[position])
                    || ["-", "_", ".", ":"].contains(text[position])
            {
                name.unicodeScalars.append(text[position])
                position += 1
            }
            guard !name.isEmpty else { throw failure("a name expected") }
            return name
        }

        private mutating func element(depth: Int) throws(Failure) -> Element {
            guard depth < Self.maximumDepth else { throw failure("elements nested too deep") }
            guard starts(with: "<") else { throw failure("an element expected") }
            position += 1
            var element = Element(name: try name())
            while true {
                skipSpace()
                if starts(with: "/>") {
                    position += 2
                    return element
                }
                if starts(with: ">") {
                    position += 1
                    break
                }
                let key = try name()
                skipSpace()
                guard starts(with: "=") else { throw failure("= expected after \(key)") }
                position += 1
                skipSpace()
                guard position < text.count, text[position] == "\"" || text[position] == "'" else {
                    throw failure("a quoted value expected for \(key)")
                }
                let quote = text[position]
                position += 1
                var value = ""
                while position < text.count, text[position] != quote {
                    guard text[position] != "<" else { throw failure("< inside an attribute") }
                    if text[position] == "&" {
                        value.unicodeScalars.append(try reference())
                    } else {
                        value.unicodeScalars.append(text[position])
                        position += 1
                    }
                }
                guard position < text.count else { throw failure("an unterminated attribute") }
                position += 1
                guard element.attributes[key] == nil else { throw failure("\(key) given twice") }
                element.attributes[key] = value
            }
            while true {
                guard position < text.count else { throw failure("</\(element.name)> never comes") }
                if starts(with: "</") {
                    position += 2
                    let closing = try name()
                    skipSpace()
                    guard closing == element.name, starts(with: ">") else {
                        throw failure("</\(closing)> closes <\(element.name)>")
                    }
                    position += 1
                    return element
                }
                if starts(with: "<!--") {
                    try skip(past: "-->")
                } else if starts(with: "<![CDATA[") {
                    position += 9
                    while position < text.count, !starts(with: "]]>") {
                        element.text.unicodeScalars.append(text[position])
                        position += 1
                    }
                    try skip(past: "]]>")
                } else if starts(with: "<") {
                    element.children.append(try self.element(depth: depth + 1))
                } else if text[position] == "&" {
                    element.text.unicodeScalars.append(try reference())
                } else {
                    element.text.unicodeScalars.append(text[position])
                    position += 1
                }
            }
        }

        /// `&lt;` and the other four, `&#N;`, `&#xN;`.
        private mutating func reference() throws(Failure) -> Unicode.Scalar {
            position += 1
            var body = ""
            while position < text.count, text[position] != ";", body.unicodeScalars.count < 10 {
                body.unicodeScalars.append(text[position])
                position += 1
            }
            guard position < text.count, text[position] == ";" else { throw failure("an unterminated &reference") }
            position += 1
            switch body {
            case "lt": return "<"
            case "gt": return ">"
            case "amp": return "&"
            case "quot": return "\""
            case "apos": return "'"
            default:
                let number: UInt32? =
                    body.hasPrefix("#x")
                    ? UInt32(body.dropFirst(2), radix: 16)
                    : body.hasPrefix("#") ? UInt32(body.dropFirst()) : nil
                guard let number, number != 0, let scalar = Unicode.Scalar(number) else {
                    throw failure("an unknown reference &\(body);")
                }
                return scalar
            }
        }
    }
}
