/// Which half of an identity an attribute of a `kSecClassIdentity` query constrains. An identity has
/// no table of its own: its query is a private-key query joined to certificates whose `pkhh` is the
/// key's `klbl`. As in Apple's join, the certificate's own columns, its label and its token go to the
/// certificate; the bookkeeping every item has (access group, synchronizable, user, tombstone) goes to
/// both; every other name constrains the key.
public enum IdentityAttributes {
    public enum Half: Sendable { case certificate, key, both }

    public static func half(of name: String) -> Half {
        if shared.contains(name) { return .both }
        if certificateNames.contains(name) { return .certificate }
        let onCertificate = AttributeSchema.descriptor(name, in: .certificate) != nil
        let onKey = AttributeSchema.descriptor(name, in: .key) != nil
        return onCertificate && !onKey ? .certificate : .key
    }

    private static let shared: Set<String> = ["agrp", "sync", "musr", "tomb"]
    private static let certificateNames: Set<String> = ["labl", "tkid"]
}
