import Foundation

// The Security object types clients declare, store in collections and compare by type id. Their
// behaviour (keys, certificates, identities, trust) arrives with the keys-and-certificates work.

public final class SecKey: Hashable, @unchecked Sendable {
    private init() {}
    public static func == (lhs: SecKey, rhs: SecKey) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

public final class SecCertificate: Hashable, @unchecked Sendable {
    private init() {}
    public static func == (lhs: SecCertificate, rhs: SecCertificate) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

public final class SecIdentity: Hashable, @unchecked Sendable {
    private init() {}
    public static func == (lhs: SecIdentity, rhs: SecIdentity) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

public final class SecTrust: Hashable, @unchecked Sendable {
    private init() {}
    public static func == (lhs: SecTrust, rhs: SecTrust) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

public final class SecPolicy: Hashable, @unchecked Sendable {
    private init() {}
    public static func == (lhs: SecPolicy, rhs: SecPolicy) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

public typealias SecKeyRef = SecKey
public typealias SecCertificateRef = SecCertificate
public typealias SecIdentityRef = SecIdentity
public typealias SecTrustRef = SecTrust
public typealias SecPolicyRef = SecPolicy
public typealias SecAccessControlRef = SecAccessControl

public func SecKeyGetTypeID() -> CFTypeID { typeID(of: SecKey.self) }
public func SecCertificateGetTypeID() -> CFTypeID { typeID(of: SecCertificate.self) }
public func SecIdentityGetTypeID() -> CFTypeID { typeID(of: SecIdentity.self) }
public func SecTrustGetTypeID() -> CFTypeID { typeID(of: SecTrust.self) }
public func SecPolicyGetTypeID() -> CFTypeID { typeID(of: SecPolicy.self) }

/// The random source handle of `SecRandomCopyBytes`; there is only the default one.
public final class SecRandom: @unchecked Sendable {
    private init() {}
}

public typealias SecRandomRef = SecRandom

public let kSecRandomDefault: SecRandomRef? = nil

/// Marks objects that stand for an authentication context (`LAContext`) in a query.
public protocol SecAuthenticationContextObject: AnyObject {}
