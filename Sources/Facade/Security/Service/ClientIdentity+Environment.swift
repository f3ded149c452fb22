import Foundation
import KeychainCore

#if canImport(Glibc)
    import Glibc
#endif

/// The client identity of this process when no daemon decides it: emulated entitlements.
extension ClientIdentity {
    /// The emulated entitlements of this process: `KEYCHAIN_ACCESS_GROUPS` (comma-separated, first =
    /// default), else the application identifier — the `CFBundleIdentifier` of an `Info.plist` beside
    /// the executable, else the executable's file name.
    public static func fromEnvironment() -> ClientIdentity {
        if let groups = environment("KEYCHAIN_ACCESS_GROUPS") {
            let list = groups.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            return ClientIdentity(accessGroups: list)
        }
        return ClientIdentity(accessGroups: [applicationIdentifier].compactMap { $0 })
    }

    /// Computed once: the executable and its Info.plist do not change while the process runs.
    public static let applicationIdentifier: String? = {
        // The kernel's link names the running file with symlinks resolved; Foundation's Bundle finds the
        // same file but scans its directory to do so, which a command-line start-up cannot afford.
        guard let executable = runningExecutablePath() ?? CommandLine.arguments.first, !executable.isEmpty else {
            return nil
        }
        let slash = executable.lastIndex(of: "/")
        let directory = slash.map { String(executable[...$0]) } ?? "./"
        if let identifier = bundleIdentifier(inPropertyList: directory + "Info.plist") { return identifier }
        let name = slash.map { String(executable[executable.index(after: $0)...]) } ?? executable
        return name.isEmpty ? nil : name
    }()

    private static func runningExecutablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func bundleIdentifier(inPropertyList path: String) -> String? {
        guard access(path, R_OK) == 0, let data = FileManager.default.contents(atPath: path),
            let info = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any],
            let identifier = info["CFBundleIdentifier"] as? String, !identifier.isEmpty
        else { return nil }
        return identifier
    }
}

/// Reads one environment variable without copying the whole environment.
private func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}
