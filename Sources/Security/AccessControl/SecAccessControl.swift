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
