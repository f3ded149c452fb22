import FoundationEssentials

/// What a backup file says of itself (`security backup info`): its header and its summary, which hold
/// counts and dates, never an attribute, a group or a secret. Read without the password, so nothing
/// here is authenticated until a restore checks the whole file.
public struct BackupSummary: Sendable, Equatable {
    /// The file format's version.
    public var formatVersion: Int
    /// The backup keybag's identity: fresh for every backup, and the one the file's items are bound to.
    public var keybagUUID: UUID
    /// When the backup was made.
    public var created: Date
    /// Made without a password: every class is wrapped by the device root alone, so the backup restores
    /// only onto the keychain (the device) it was made from.
    public var deviceBound: Bool
    /// The items in the file, by item class (`genp`, `inet`, `cert`, `keys`).
    public var itemsPerClass: [String: Int]
    /// The items in the file, by protection class (`ak`, `ck`, `dk`, `aku`, `cku`, `dku`).
    public var itemsPerProtection: [String: Int]
    /// The items left out of the backup, by why (`BackupSkip`).
    public var skipped: [String: Int]

    /// A summary with these values (the engine reads one from a file; tests and the wire build one).
    public init(
        formatVersion: Int, keybagUUID: UUID, created: Date, deviceBound: Bool, itemsPerClass: [String: Int],
        itemsPerProtection: [String: Int], skipped: [String: Int]
    ) {
        self.formatVersion = formatVersion
        self.keybagUUID = keybagUUID
        self.created = created
        self.deviceBound = deviceBound
        self.itemsPerClass = itemsPerClass
        self.itemsPerProtection = itemsPerProtection
        self.skipped = skipped
    }

    /// Every item the file holds.
    public var itemCount: Int { itemsPerClass.values.reduce(0, +) }
}

/// Why an item is not in a backup: each of Apple's rules, and items that do not open.
public enum BackupSkip: String, Sendable, CaseIterable {
    /// `WhenPasscodeSetThisDeviceOnly`: never leaves the device, and is lost across restores.
    case passcodeOnly
    /// A token's item (an enclave key): its private half exists only under this device's root.
    case tokenItem
    /// An item whose access control guards its secret, left out by the builds that did not yet carry
    /// such items sealed under their factors (as Apple's backups leave them out). This build carries
    /// them, so it counts none here; the case stays for the summaries of earlier files.
    case needsUser
    /// A row that does not open under its class key (damaged), or whose class is locked.
    case unreadable
    /// An item larger than a restore accepts (80 MiB), which would make the whole file unrestorable.
    case tooLarge
}

/// What a restore did (`security backup restore`).
public struct RestoreReport: Sendable, Equatable {
    /// Items written from the backup.
    public var restored: Int
    /// `ThisDeviceOnly` items of a backup made on another device: absent here, as on Apple's devices.
    public var notForThisDevice: Int
    /// Items that could not be re-sealed here one by one (counted, never silently dropped).
    public var skipped: Int
    /// Local items the backup replaced (every non-synchronizable item the keychain held).
    public var replacedLocal: Int
    /// Items where the keychain's own copy was kept: a synchronizable item, or a newer one (`mdat`).
    public var keptLocal: Int

    /// A report with these counts.
    public init(restored: Int, notForThisDevice: Int, skipped: Int, replacedLocal: Int, keptLocal: Int) {
        self.restored = restored
        self.notForThisDevice = notForThisDevice
        self.skipped = skipped
        self.replacedLocal = replacedLocal
        self.keptLocal = keptLocal
    }
}

/// Where a backup is written or read.
public enum BackupFile: Sendable, Equatable {
    /// A file the keychain service opens by its path: the embedded keychain, or a user's daemon, which
    /// runs as the user. A system daemon takes none: it would open the file as itself.
    case path(String)
    /// A file the caller opened itself: through a daemon it travels beside the request's frame (a
    /// descriptor passed over the socket), so the daemon reads or writes it without opening anything
    /// on the caller's behalf. For a backup, a new empty file the caller renames into place afterwards;
    /// the caller keeps and closes its own descriptor.
    case descriptor(Int32)
}
