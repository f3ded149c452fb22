/// The protection classes of `kSecAttrAccessible`, numbered as Apple's keystore numbers them.
///
/// Each has its own class key, so a ThisDeviceOnly class can later stay behind when the migratory
/// classes are re-wrapped for a backup.
public enum ProtectionClass: Int, CaseIterable, Sendable, Hashable {
    case whenUnlocked = 6  // ak
    case afterFirstUnlock = 7  // ck
    case always = 8  // dk
    case whenUnlockedThisDeviceOnly = 9  // aku
    case afterFirstUnlockThisDeviceOnly = 10  // cku
    case alwaysThisDeviceOnly = 11  // dku
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

    public init?(attributeValue: String) {
        guard let found = Self.allCases.first(where: { $0.attributeValue == attributeValue }) else { return nil }
        self = found
    }

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
