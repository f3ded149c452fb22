/// What an access control asks of the user before its item's secret is used: the constraint tree
/// that `SecAccessControlCreateFlags` describe (Apple's `kofn`: several factors are all required unless
/// `.or` says any one will do).
public indirect enum AccessConstraint: Sendable, Hashable {
    /// Biometry, or the device passcode when biometry is unavailable (`LAPolicy.deviceOwnerAuthentication`).
    case userPresence
    /// Any enrolled biometry, whatever is enrolled later.
    case biometryAny
    /// The biometry enrolled when the item was made: a change of the enrolled set makes the item
    /// unreadable for good.
    case biometryCurrentSet
    /// The keychain's passcode, asked through the passcode prompt and checked as an unlock is (counted,
    /// under the same delays).
    case devicePasscode
    /// A paired companion device (Apple's watch).
    case companion
    /// Every one of these factors (`.and`, and Apple's default when several flags are given).
    case all([AccessConstraint])
    /// Any one of these factors (`.or`); a cancel of one ends the whole evaluation.
    case any([AccessConstraint])

    /// Whether every way of satisfying the tree needs the current biometry set: the item is then bound
    /// to it, by cryptography (a new enrollment makes it unreadable for good).
    public var bindsBiometryEnrollment: Bool { requires(.biometryCurrentSet) }

    /// Whether every way of satisfying the tree needs the device passcode: the item is then bound to a
    /// passcode being set (removing it makes the item unreadable for good). An alternative that does
    /// without (`.or` with biometry) keeps the item reachable, so it binds nothing.
    public var bindsDevicePasscode: Bool { requires(.devicePasscode) }

    /// Whether the tree names the current biometry set as one alternative without every alternative
    /// needing it: the item records which set it was made under (`ItemRecord.biometryBinding`).
    public var offersBiometryCurrentSet: Bool { mentions(.biometryCurrentSet) && !bindsBiometryEnrollment }

    /// Whether every requirement of the tree is a factor whose secret the item's content key is
    /// derived from (the current biometry set, the device passcode), all of them required: then no
    /// policy that opens the same sealed content asks for less.
    public var isBoundByFactorsAlone: Bool {
        switch self {
        case .biometryCurrentSet, .devicePasscode: true
        case .all(let parts): !parts.isEmpty && parts.allSatisfy(\.isBoundByFactorsAlone)
        default: false
        }
    }

    private func mentions(_ factor: AccessConstraint) -> Bool {
        switch self {
        case .all(let parts), .any(let parts): parts.contains { $0.mentions(factor) }
        default: self == factor
        }
    }

    private func requires(_ factor: AccessConstraint) -> Bool {
        switch self {
        case .all(let parts): parts.contains { $0.requires(factor) }
        case .any(let parts): !parts.isEmpty && parts.allSatisfy { $0.requires(factor) }
        default: self == factor
        }
    }
}

extension AccessControlPolicy {
    /// The flag bits `SecAccessControlCreateFlags` defines (Apple's values).
    public enum Flag {
        /// `.userPresence`: biometry when a set is enrolled, else the device passcode.
        public static let userPresence: UInt = 1 << 0
        /// `.biometryAny`.
        public static let biometryAny: UInt = 1 << 1
        /// `.biometryCurrentSet`.
        public static let biometryCurrentSet: UInt = 1 << 3
        /// `.devicePasscode`.
        public static let devicePasscode: UInt = 1 << 4
        /// `.companion` (`.watch`).
        public static let companion: UInt = 1 << 5
        /// `.or`: any one of the factors will do.
        public static let or: UInt = 1 << 14
        /// `.and`: every factor is needed.
        public static let and: UInt = 1 << 15
        /// `.privateKeyUsage`: for keys, the constraints guard signing and key exchange.
        public static let privateKeyUsage: UInt = 1 << 30
        /// `.applicationPassword`: the secret is also sealed under a password the app gives.
        public static let applicationPassword: UInt = 1 << 31
        /// Every bit above; any other bit makes the flags invalid, as Apple's are, so that an access
        /// control from a daemon frame cannot carry a bit this build does not enforce.
        public static let known: UInt =
            userPresence | biometryAny | biometryCurrentSet | devicePasscode | companion | or | and | privateKeyUsage
            | applicationPassword
    }

    /// Why these flags cannot make an access control (Apple's rules), or nil when they can.
    public static func problem(withFlags flags: UInt) -> String? {
        if flags & ~Flag.known != 0 { return "unknown flag bits 0x\(String(flags & ~Flag.known, radix: 16))" }
        if flags & Flag.or != 0, flags & Flag.and != 0 { return "only one logical operation can be set" }
        if flags & Flag.biometryAny != 0, flags & Flag.biometryCurrentSet != 0 {
            return "only one bio constraint can be set"
        }
        if flags & Flag.userPresence != 0,
            flags & ~(Flag.userPresence | Flag.applicationPassword | Flag.privateKeyUsage) != 0
        {
            return "user presence cannot be combined with other constraints"
        }
        return nil
    }

    /// The factors the user must present, or nil when the policy asks for none (a protection class
    /// alone, or only an application password, which is no prompt of the device's).
    public var constraint: AccessConstraint? {
        var factors: [AccessConstraint] = []
        if flags & Flag.userPresence != 0 { factors.append(.userPresence) }
        if flags & Flag.biometryAny != 0 { factors.append(.biometryAny) }
        if flags & Flag.biometryCurrentSet != 0 { factors.append(.biometryCurrentSet) }
        if flags & Flag.devicePasscode != 0 { factors.append(.devicePasscode) }
        if flags & Flag.companion != 0 { factors.append(.companion) }
        switch factors.count {
        case 0: return nil
        case 1: return factors[0]
        default: return flags & Flag.or != 0 ? .any(factors) : .all(factors)
        }
    }

    /// The item's secret is also sealed under a password the app supplies (`LAContext.setCredential`).
    public var requiresApplicationPassword: Bool { flags & Flag.applicationPassword != 0 }

    /// For keys: the constraint guards signing and key exchange rather than reading.
    public var isPrivateKeyUsage: Bool { flags & Flag.privateKeyUsage != 0 }

    /// Whether reading the item's secret asks for anything: a factor or an application password.
    public var guardsSecret: Bool { constraint != nil || requiresApplicationPassword }
}
