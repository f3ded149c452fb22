import FoundationEssentials
import KeychainBytes

/// One secret read from another store (a gnome-keyring keyring, a KWallet export) by the `security`
/// command, on its way into the Secret Service's items. The command reads and decrypts the file as the
/// user; the daemon decides where each secret goes.
public struct ImportedSecret: Sendable, Equatable {
    /// The label of the collection (keyring, wallet) it was in; the default collection's ("Login")
    /// or an empty one puts it in the default collection.
    public var collection: String
    /// Its label (the item's name in the other store).
    public var label: String
    /// Its lookup attributes, as the Secret Service shows them.
    public var attributes: [String: String]
    /// The secret itself, in wiped memory.
    public var secret: SecureBytes
    /// The secret's MIME type (`text/plain` unless the source says otherwise).
    public var contentType: String
    /// Executables the source's access list named for it: an item goes to the group of a registered
    /// app among them, else to the group unregistered programs share.
    public var applications: [String]

    /// A secret as read from its source.
    public init(
        collection: String, label: String, attributes: [String: String], secret: SecureBytes,
        contentType: String = "text/plain", applications: [String] = []
    ) {
        self.collection = collection
        self.label = label
        self.attributes = attributes
        self.secret = secret
        self.contentType = contentType
        self.applications = applications
    }
}

/// What an import did: how many secrets it stored, and how many it left out, by reason.
public struct ImportReport: Sendable, Equatable {
    /// How many secrets were stored.
    public var imported: Int
    /// Reasons ("already present", "refused: …") and how many secrets each left out.
    public var skipped: [String: Int]

    /// A report of `imported` secrets stored and `skipped` left out.
    public init(imported: Int, skipped: [String: Int]) {
        self.imported = imported
        self.skipped = skipped
    }
}
