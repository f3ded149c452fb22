import Foundation
import KeychainCore

/// `SecAccessControlCreateFlags`, with Apple's bit values.
public struct SecAccessControlCreateFlags: OptionSet, Sendable, Hashable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    @available(*, deprecated, renamed: "biometryAny")
    public static let touchIDAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static let touchIDCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    public static let devicePasscode = SecAccessControlCreateFlags(rawValue: 1 << 4)
    public static let watch = SecAccessControlCreateFlags(rawValue: 1 << 5)
    public static let companion = SecAccessControlCreateFlags(rawValue: 1 << 5)
    public static let or = SecAccessControlCreateFlags(rawValue: 1 << 14)
    public static let and = SecAccessControlCreateFlags(rawValue: 1 << 15)
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
    public static let applicationPassword = SecAccessControlCreateFlags(rawValue: 1 << 31)
}

/// An access-control object: a protection class plus constraints.
public final class SecAccessControl: Hashable, @unchecked Sendable {
    /// The protection class and flags, as the keychain service receives them (this project's own).
    public let policy: AccessControlPolicy

    init(policy: AccessControlPolicy) { self.policy = policy }

    public static func == (lhs: SecAccessControl, rhs: SecAccessControl) -> Bool { lhs.policy == rhs.policy }

    public func hash(into hasher: inout Hasher) { hasher.combine(policy) }
}

public func SecAccessControlGetTypeID() -> CFTypeID { typeID(of: SecAccessControl.self) }

/// Creates an access control, rejecting the combinations Apple rejects (errSecParam in `error`).
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    func fail(_ reason: String) -> SecAccessControl? {
        error?.pointee = Unmanaged.passRetained(
            NSError(
                domain: String(kCFErrorDomainOSStatus), code: Int(errSecParam),
                userInfo: [NSLocalizedDescriptionKey: "SecAccessControl: \(reason)"]))
        return nil
    }
    guard let protectionName = (protection as? String) ?? (protection as? NSString).map({ String($0) }),
        let protectionClass = ProtectionClass(attributeValue: protectionName)
    else { return fail("invalid protection") }
    if let problem = AccessControlPolicy.problem(withFlags: UInt(flags.rawValue)) { return fail(problem) }
    return SecAccessControl(policy: AccessControlPolicy(protection: protectionClass, flags: UInt(flags.rawValue)))
}

/// The protection class an access control was made with (a `kSecAttrAccessible` value). Apple's
/// private SPI of the same name, offered for code that inspects access controls.
public func SecAccessControlGetProtection(_ accessControl: SecAccessControl) -> CFTypeRef {
    SecConstantString(string: accessControl.policy.protection.attributeValue)
}

/// The constraint of one operation (`"od"` decrypt, `"oe"` encrypt, `"odel"` delete; for
/// `privateKeyUsage`, `"osgn"` sign, `"ock"` key exchange, `"oa"` attest): `kCFBooleanTrue` when the
/// operation is always allowed, else a dictionary describing the factors. Apple keeps these as DER in
/// its SPI; this representation is the project's own (docs/access-control.md): a factor is a string
/// (`"userPresence"`, `"biometryAny"`, `"biometryCurrentSet"`, `"devicePasscode"`, `"companion"`),
/// several are `["kofn": k, "factors": [...]]`, and an application password adds `"password": true`.
public func SecAccessControlGetConstraint(_ accessControl: SecAccessControl, _ operation: CFTypeRef) -> CFTypeRef? {
    guard let operation = (operation as? String) ?? (operation as? NSString).map({ String($0) }) else { return nil }
    return SecAccessControlGetConstraints(accessControl).flatMap { ($0 as? [String: Any])?[operation] as AnyObject? }
}

/// Every operation's constraint (see `SecAccessControlGetConstraint`); nil for an access control with
/// no flags, which allows everything.
public func SecAccessControlGetConstraints(_ accessControl: SecAccessControl) -> CFDictionary? {
    let policy = accessControl.policy
    guard policy.flags != 0 else { return nil }
    var guarded: AnyObject = kCFBooleanTrue
    if let constraint = policy.constraint {
        let described = NSMutableDictionary(dictionary: ["factor": describe(constraint)])
        if policy.requiresApplicationPassword { described["password"] = kCFBooleanTrue }
        guarded = described
    } else if policy.requiresApplicationPassword {
        guarded = NSDictionary(dictionary: ["password": kCFBooleanTrue as Any])
    }
    let always: AnyObject = kCFBooleanTrue
    let operations: [String: AnyObject] =
        policy.isPrivateKeyUsage
        ? ["osgn": guarded, "ock": guarded, "oa": always, "odel": always]
        : ["od": guarded, "oe": always, "odel": always]
    return NSDictionary(dictionary: operations)
}

private func describe(_ constraint: AccessConstraint) -> AnyObject {
    switch constraint {
    case .userPresence: "userPresence" as NSString
    case .biometryAny: "biometryAny" as NSString
    case .biometryCurrentSet: "biometryCurrentSet" as NSString
    case .devicePasscode: "devicePasscode" as NSString
    case .companion: "companion" as NSString
    case .all(let parts):
        NSDictionary(dictionary: ["kofn": parts.count, "factors": NSArray(array: parts.map(describe))])
    case .any(let parts): NSDictionary(dictionary: ["kofn": 1, "factors": NSArray(array: parts.map(describe))])
    }
}
