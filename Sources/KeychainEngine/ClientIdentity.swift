import Foundation

/// Who is calling: the access groups its entitlements grant, in order (the first is the default for
/// new items). The embedded keychain takes them from the environment; the daemon will derive them
/// from the peer's credentials.
public struct ClientIdentity: Sendable, Equatable {
    /// The group of CryptoTokenKit items: readable when entitled, never writable.
    public static let tokenAccessGroup = "com.apple.token"

    public var accessGroups: [String]

    public init(accessGroups: [String]) {
        self.accessGroups = accessGroups
    }

    var writableGroups: [String] { accessGroups.filter { $0 != Self.tokenAccessGroup } }

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
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
        let executableURL = Bundle.main.executableURL?.resolvingSymlinksInPath() ?? executable
        let plist = executableURL.deletingLastPathComponent().appendingPathComponent("Info.plist")
        if let data = try? Data(contentsOf: plist),
            let info = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any],
            let identifier = info["CFBundleIdentifier"] as? String, !identifier.isEmpty
        {
            return identifier
        }
        let name = executableURL.lastPathComponent
        return name.isEmpty ? nil : name
    }()
}

/// Reads one environment variable without copying the whole environment.
func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}
