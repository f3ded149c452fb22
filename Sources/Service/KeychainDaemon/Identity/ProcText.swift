import FoundationEssentials

/// The kernel's `/proc` text files split as bytes. They are ASCII but for the paths and names they
/// quote, and the daemon reads several of them for every process that connects: splitting them as
/// Swift `String`s (grapheme by grapheme) cost more than the request those processes make.
enum ProcText {
    static let newline = UInt8(ascii: "\n")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")

    /// The lines of `text`, without their newlines.
    static func lines(_ text: [UInt8]) -> [ArraySlice<UInt8>] {
        text.split(separator: newline)
    }

    /// `bytes` without the spaces and tabs at either end.
    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == space || first == tab { slice = slice.dropFirst() }
        while let last = slice.last, last == space || last == tab { slice = slice.dropLast() }
        return slice
    }

    /// `bytes` as text (a path the kernel quotes may not be UTF-8: it is repaired, as it would be shown).
    static func text(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// The `name: value` lines of an fdinfo or status file, the value trimmed; the first of a name wins.
    static func fields(_ text: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for line in lines(text) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = Self.text(line[..<colon])
            if fields[name] == nil { fields[name] = Self.text(trimmed(line[(colon + 1)...])) }
        }
        return fields
    }

    /// The value of the first `name:` line, trimmed; nil when no line has that name.
    static func field(_ name: String, in text: [UInt8]) -> ArraySlice<UInt8>? {
        let prefix = Array(name.utf8) + [UInt8(ascii: ":")]
        for line in lines(text) where line.starts(with: prefix) {
            return trimmed(line.dropFirst(prefix.count))
        }
        return nil
    }

    /// The fields of a `/proc/<pid>/stat` from the third on (`fields[0]` is field 3, the state). The
    /// command name (field 2) may hold spaces and parentheses: the fields start after its last ')'.
    static func statFields(_ stat: [UInt8]) -> [String]? {
        guard let end = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        return stat[(end + 1)...].split(whereSeparator: { $0 == space || $0 == newline }).map(text)
    }

    /// An executable mapping of a `/proc/<pid>/maps` line: the mapped file's path as the kernel wrote
    /// it (bytes, since a path need not be UTF-8; empty for memory no file backs, `[vdso]` and the like
    /// for the kernel's own), and the inode the kernel names (nil when that field is not a number).
    struct ExecutableMapping: Equatable {
        let path: [UInt8]
        let inode: UInt64?

        /// The path as text, for messages (bytes that are not UTF-8 repaired).
        var text: String { ProcText.text(path[...]) }
    }

    /// The line's executable mapping; nil for a mapping that is not executable, or a line with fewer
    /// than the five fields before the path (`start-end perms offset device inode path`). The kernel
    /// pads before the path: the spaces there are its; a space the path ends with is the file's name.
    static func executableMapping(_ line: ArraySlice<UInt8>) -> ExecutableMapping? {
        let fields = line.split(separator: space, maxSplits: 5, omittingEmptySubsequences: true)
        guard fields.count >= 5, fields[1].contains(UInt8(ascii: "x")) else { return nil }
        let path = fields.count == 6 ? Array(fields[5].drop { $0 == space }) : []
        return ExecutableMapping(path: path, inode: UInt64(text(fields[4])))
    }
}
