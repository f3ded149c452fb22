/// What the Secret Service does for a program that is not a registered app of the keychain
/// (`security app policy secret-service ask|allow|deny`): ask the user once per executable (path and
/// SHA-256) and keep the answer, allow it into the shared group, or refuse it.
public enum SecretServicePolicy: String, Sendable, CaseIterable, Codable {
    /// Ask the user once per executable (path and SHA-256), and keep the answer.
    case ask
    /// Let the program into the group unregistered programs share.
    case allow
    /// Refuse the program.
    case deny

    /// The policy of a keychain nobody has set one for.
    public static let standard = SecretServicePolicy.ask

    /// The access group that programs allowed by the policy share (registered apps have their own
    /// groups, and see this one only if their entry lists it).
    public static let sharedAccessGroup = "org.freedesktop.secrets"
}
