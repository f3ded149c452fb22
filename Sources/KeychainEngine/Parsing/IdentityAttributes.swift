/// Which half of an identity an attribute of a `kSecClassIdentity` query constrains. An identity has
/// no table of its own: its query is a certificate query joined to a private-key query, and a name
/// both classes have belongs to the certificate (Apple's rule: certificate first, then key).
public enum IdentityAttributes {
    /// True when `name` is an attribute of key items and not of certificate items (`atag`, `kcls`,
    /// the usage flags …).
    public static func constrainsKey(_ name: String) -> Bool {
        AttributeSchema.descriptor(name, in: .certificate) == nil && AttributeSchema.descriptor(name, in: .key) != nil
    }
}
