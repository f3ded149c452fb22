import Foundation
import KeychainCore

// The Security object types clients declare, store in collections and compare by type id. `SecKey`
// is in SecKey.swift; certificates, identities and trust arrive with the rest of that work.

/// What every Security object type shares: identity equality and hashing, as CF objects have.
public class SecObject: Hashable, @unchecked Sendable {
    init() {}
    public static func == (lhs: SecObject, rhs: SecObject) -> Bool { lhs.isSame(as: rhs) }
    /// Identity, unless the kind of object says otherwise (keys are equal when they are the same key).
    func isSame(as other: SecObject) -> Bool { self === other }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

public final class SecTrust: SecObject, @unchecked Sendable {}
public final class SecPolicy: SecObject, @unchecked Sendable {}

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

/// Marks objects that stand for an authentication context (`LAContext`) in a query: what it tells the
/// keychain service about itself (its identifier, whether it may ask the user, its credential).
public protocol SecAuthenticationContextObject: AnyObject {
    var contextIdentifier: UUID { get }
    var authenticationContextReference: AuthenticationContextReference { get }
}
