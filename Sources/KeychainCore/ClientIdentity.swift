/// Who is calling: the access groups its entitlements grant, in order (the first is the default for
/// new items). The embedded keychain takes them from the environment; the daemon will derive them
/// from the peer's credentials.
public struct ClientIdentity: Sendable, Equatable, Codable {
    /// The group of CryptoTokenKit items: readable when entitled, never writable.
    public static let tokenAccessGroup = "com.apple.token"

    public var accessGroups: [String]

    public init(accessGroups: [String]) {
        self.accessGroups = accessGroups
    }

    /// The groups the client may write to, in order.
    public var writableGroups: [String] { accessGroups.filter { $0 != Self.tokenAccessGroup } }
}
