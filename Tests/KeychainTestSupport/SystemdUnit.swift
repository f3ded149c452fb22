import Foundation

/// A systemd unit file read the way the tests need it: the settings of each section, every value of a
/// setting that is given more than once, in order.
public struct SystemdUnit {
    public let path: String
    private var sections: [String: [String: [String]]] = [:]

    public init(path: String) throws {
        self.path = path
        var section = ""
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.isEmpty || text.hasPrefix("#") || text.hasPrefix(";") { continue }
            if text.hasPrefix("["), text.hasSuffix("]") {
                section = String(text.dropFirst().dropLast())
                continue
            }
            guard let equals = text.firstIndex(of: "=") else { continue }
            let key = text[..<equals].trimmingCharacters(in: .whitespaces)
            let value = text[text.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[section, default: [:]][key, default: []].append(value)
        }
    }

    /// Every value of `key` in `section`.
    public func values(_ key: String, in section: String = "Service") -> [String] {
        sections[section]?[key] ?? []
    }

    /// The value of `key`, split into words (lists such as capabilities and address families).
    public func words(_ key: String, in section: String = "Service") -> [String] {
        values(key, in: section).flatMap { $0.split(separator: " ").map(String.init) }
    }

    /// The settings of a section.
    public func keys(in section: String = "Service") -> Set<String> {
        Set(sections[section]?.keys ?? [:].keys)
    }
}
