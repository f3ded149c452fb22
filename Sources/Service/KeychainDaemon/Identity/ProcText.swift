import FoundationEssentials

/// The kernel's `/proc` text files split as bytes. They are ASCII but for the paths and names they
/// quote, and the daemon reads several of them for every process that connects: splitting them as
/// Swift `String`s (grapheme by grapheme) cost more than the request those processes make.
enum ProcText {
    static let newline = UInt8(ascii: "\n")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")

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

    /// The value of the first `name:` line, trimmed; nil when no line has that name.
    static func field(_ name: String, in text: [UInt8]) -> ArraySlice<UInt8>? {
        let prefix = Array(name.utf8) + [UInt8(ascii: ":")]
        var found: ArraySlice<UInt8>?
        forEachLine(text) { line in
            guard line.starts(with: prefix) else { return true }
            found = trimmed(line.dropFirst(prefix.count))
            return false
        }
        return found
    }

    /// Field `number` of a `/proc/<pid>/stat` as proc(5) numbers them (3 is the state, 22 the start
    /// time), as a decimal number; nil when the file has no such field or it is not a number. The
    /// command name (field 2) may hold spaces and parentheses: the fields start after its last ')'.
    /// The daemon reads a few of the fifty-odd fields for every caller: they are found in place,
    /// without splitting the rest.
    static func statNumber(_ number: Int, in stat: [UInt8]) -> UInt64? {
        guard number >= 3, let end = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        var index = end + 1
        var field = 2
        while index < stat.endIndex {
            while index < stat.endIndex, stat[index] == space || stat[index] == newline { index += 1 }
            guard index < stat.endIndex else { return nil }
            var finish = index
            while finish < stat.endIndex, stat[finish] != space, stat[finish] != newline { finish += 1 }
            field += 1
            if field == number { return decimal(stat[index..<finish]) }
            index = finish
        }
        return nil
    }

    /// `bytes` as an unsigned decimal number (digits only, at most 20 of them, no overflow); nil otherwise.
    static func decimal(_ bytes: ArraySlice<UInt8>) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = shifted.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflowA, !overflowB else { return nil }
            value = sum
        }
        return value
    }

    /// Calls `body` with each line of `text` (without its newline; empty lines skipped), in place;
    /// stops early when `body` returns false.
    static func forEachLine(_ text: [UInt8], _ body: (ArraySlice<UInt8>) -> Bool) {
        var start = text.startIndex
        while start < text.endIndex {
            let end = text[start...].firstIndex(of: newline) ?? text.endIndex
            if end > start, !body(text[start..<end]) { return }
            start = end + 1
        }
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
        // Five fields found in place (most lines are not executable and end at the second).
        var index = line.startIndex
        var permissions: ArraySlice<UInt8> = []
        var inode: ArraySlice<UInt8> = []
        for field in 0..<5 {
            while index < line.endIndex, line[index] == space { index += 1 }
            guard index < line.endIndex else { return nil }
            var finish = index
            while finish < line.endIndex, line[finish] != space { finish += 1 }
            if field == 1 {
                permissions = line[index..<finish]
                guard permissions.contains(UInt8(ascii: "x")) else { return nil }
            }
            if field == 4 { inode = line[index..<finish] }
            index = finish
        }
        // After the separator that ends the inode, the rest of the line, its padding dropped, is the path.
        let path = index < line.endIndex ? Array(line[(index + 1)...].drop { $0 == space }) : []
        return ExecutableMapping(path: path, inode: decimal(inode))
    }
}
