/// The protection classes of `kSecAttrAccessible`, numbered as Apple's keystore numbers them.
///
/// Each has its own class key, so a ThisDeviceOnly class can later stay behind when the migratory
/// classes are re-wrapped for a backup.
public enum ProtectionClass: Int, CaseIterable, Sendable, Hashable {
    /// `kSecAttrAccessibleWhenUnlocked`: class A, the default for new items other than certificates.
    case whenUnlocked = 6  // ak
    /// `kSecAttrAccessibleAfterFirstUnlock`: class C.
    case afterFirstUnlock = 7  // ck
    /// `kSecAttrAccessibleAlways`: class D, available even before the first unlock.
    case always = 8  // dk
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`.
    case whenUnlockedThisDeviceOnly = 9  // aku
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`.
    case afterFirstUnlockThisDeviceOnly = 10  // cku
    /// `kSecAttrAccessibleAlwaysThisDeviceOnly`.
    case alwaysThisDeviceOnly = 11  // dku
    /// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`: class A, and only while a passcode is set;
    /// removing the passcode destroys these items.
    case whenPasscodeSetThisDeviceOnly = 12  // akpu

    /// Data-protection tier: when the class key is in memory.
    public enum Tier: Sendable {
        /// Class A: while unlocked.
        case whenUnlocked
        /// Class C: from the first unlock after start until restart.
        case afterFirstUnlock
        /// Class D: always.
        case always
    }

    /// The `kSecAttrAccessible` value (`pdmn`).
    public var attributeValue: String {
        switch self {
        case .whenUnlocked: "ak"
        case .afterFirstUnlock: "ck"
        case .always: "dk"
        case .whenUnlockedThisDeviceOnly: "aku"
        case .afterFirstUnlockThisDeviceOnly: "cku"
        case .alwaysThisDeviceOnly: "dku"
        case .whenPasscodeSetThisDeviceOnly: "akpu"
        }
    }

    /// The class a `kSecAttrAccessible` value names; nil for any other string.
    public init?(attributeValue: String) {
        guard let found = Self.allCases.first(where: { $0.attributeValue == attributeValue }) else { return nil }
        self = found
    }

    /// When this class's key is in memory.
    public var tier: Tier {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: .whenUnlocked
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: .afterFirstUnlock
        case .always, .alwaysThisDeviceOnly: .always
        }
    }

    /// ThisDeviceOnly classes never leave this device's root.
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock, .always: false
        default: true
        }
    }

    /// The class exists only while a passcode is set.
    public var requiresPasscode: Bool { self == .whenPasscodeSetThisDeviceOnly }

}
