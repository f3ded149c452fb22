#if canImport(Glibc)
    import Glibc
#endif

/// The few path operations the keychain needs, on paths as text, without Foundation's `NSString`: the
/// lower modules build on FoundationEssentials alone. They follow `NSString`'s path methods for the
/// absolute and relative paths the keychain makes (no tilde expansion).
public enum PathText {
    /// `directory` and `name` joined by one slash (`appendingPathComponent`): "/a/" + "b" is "/a/b",
    /// "/" + "b" is "/b", "" + "b" is "b".
    public static func join(_ directory: String, _ name: String) -> String {
        let base = withoutTrailingSlashes(directory)
        if base.isEmpty { return name }
        return base == "/" ? "/" + name : base + "/" + name
    }

    /// The path without its last component (`deletingLastPathComponent`): "/a/b" is "/a", "/a/b/" is
    /// "/a", "/a" is "/", "/" is "/", "a" is "".
    public static func parent(_ path: String) -> String {
        let trimmed = withoutTrailingSlashes(path)
        guard trimmed != "/" else { return "/" }
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        let head = withoutTrailingSlashes(String(trimmed[..<slash]))
        return head.isEmpty ? "/" : head
    }

    /// The last component (`lastPathComponent`): "/a/b" and "/a/b/" are "b", "/" is "/", "" is "".
    public static func lastComponent(_ path: String) -> String {
        let trimmed = withoutTrailingSlashes(path)
        guard trimmed != "/", let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// One spelling for the path, to compare two (`standardizingPath`): as the file system names it
    /// (`realpath`: links resolved, `.` and `..` gone) when it exists, else with repeated slashes, `.`
    /// components and the trailing slash removed.
    public static func standardized(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        let absolute = path.hasPrefix("/")
        let parts = path.split(separator: "/").filter { $0 != "." }
        let joined = parts.joined(separator: "/")
        return absolute ? "/" + joined : joined
    }

    /// The path without the slashes it ends with, "/" for a path of slashes alone.
    private static func withoutTrailingSlashes(_ path: String) -> String {
        var end = path.endIndex
        while end > path.startIndex, path[path.index(before: end)] == "/" { end = path.index(before: end) }
        if end == path.startIndex { return path.isEmpty ? "" : "/" }
        return String(path[..<end])
    }
}

extension StringProtocol {
    /// The text without the white space and line breaks it starts or ends with.
    public var trimmingWhitespace: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }),
            let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}
