/// Who is calling: the access groups its entitlements grant, in order (the first is the default for
/// new items). The embedded keychain takes them from the environment; the daemon will derive them
/// from the peer's credentials.
public struct ClientIdentity: Sendable, Equatable {
    /// The group of CryptoTokenKit items: readable when entitled, never writable.
    public static let tokenAccessGroup = "com.apple.token"

    /// The groups the client's items may live in: reads search all of them, new items go to the first.
    public var accessGroups: [String]
    /// Where the client's authentication contexts live: the daemon names the calling process, so that a
    /// context identifier from another process names nothing. Nil: this process (the embedded keychain).
    public var contextScope: String?

    /// An identity with these groups; the embedded keychain leaves `contextScope` nil.
    public init(accessGroups: [String], contextScope: String? = nil) {
        self.accessGroups = accessGroups
        self.contextScope = contextScope
    }

    /// The groups the client may write to, in order.
    public var writableGroups: [String] { accessGroups.filter { $0 != Self.tokenAccessGroup } }
}
