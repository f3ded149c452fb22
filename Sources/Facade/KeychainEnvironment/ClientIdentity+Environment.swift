import FoundationEssentials
import KeychainBytes
import KeychainCore
import Synchronization

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
            let list = groups.split(separator: ",").map(\.trimmingWhitespace).filter { !$0.isEmpty }
            return ClientIdentity(accessGroups: list)
        }
        return ClientIdentity(accessGroups: [applicationIdentifier].compactMap { $0 })
    }

    /// The application identifier: the `CFBundleIdentifier` of an `Info.plist` beside the executable,
    /// else the name given with `identifyThisProgram(as:)`, else the executable's file name.
    public static var applicationIdentifier: String? {
        bundleIdentifierBesideExecutable ?? programName.withLock { $0 } ?? executableName
    }

    /// Gives this program the application identifier of another: the `security` command's verbs that
    /// need the Security API run in a second executable (`security-full`) that the command starts in
    /// its place, and what either half stores embedded must be in the same access group. Called
    /// before the first keychain call.
    package static func identifyThisProgram(as name: String) {
        programName.withLock { $0 = name }
    }

    private static let programName = Mutex<String?>(nil)

    /// The running executable's path, computed once: it does not change while the process runs. The
    /// kernel's link names the running file with symlinks resolved; Foundation's Bundle finds the same
    /// file but scans its directory to do so, which a command-line start-up cannot afford.
    private static let executablePath: String? = {
        guard let executable = runningExecutablePath() ?? CommandLine.arguments.first, !executable.isEmpty else {
            return nil
        }
        return executable
    }()

    /// The `CFBundleIdentifier` of the `Info.plist` beside the executable, read once.
    private static let bundleIdentifierBesideExecutable: String? = {
        guard let executable = executablePath else { return nil }
        let slash = executable.lastIndex(of: "/")
        let directory = slash.map { String(executable[...$0]) } ?? "./"
        return bundleIdentifier(inPropertyList: directory + "Info.plist")
    }()

    private static var executableName: String? {
        guard let executable = executablePath else { return nil }
        let name =
            executable.lastIndex(of: "/").map { String(executable[executable.index(after: $0)...]) } ?? executable
        return name.isEmpty ? nil : name
    }

    private static func runningExecutablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func bundleIdentifier(inPropertyList path: String) -> String? {
        guard access(path, R_OK) == 0, let data = FileManager.default.contents(atPath: path),
            let info = try? PropertyListDecoder().decode(BundleInfo.self, from: data),
            let identifier = info.CFBundleIdentifier, !identifier.isEmpty
        else { return nil }
        return identifier
    }

    /// The one key of an `Info.plist` that names the application (XML or binary property list).
    private struct BundleInfo: Decodable {
        // swift-format-ignore: AlwaysUseLowerCamelCase
        let CFBundleIdentifier: String?
    }
}

/// Reads one environment variable without copying the whole environment.
private func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}
