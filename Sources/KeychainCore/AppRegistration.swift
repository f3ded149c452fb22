import Foundation
import KeychainCrypto

/// One executable the daemon knows: who it is (its application identifier) and which access groups its
/// items may live in. The daemon's app registry holds these; a client's executable is matched against
/// them on every connection, and claims a client makes about itself are never consulted.
public struct AppRegistration: Sendable, Equatable, Codable {
    /// The executable's absolute path, as registered.
    public var executablePath: String
    /// SHA-256 of the executable's contents when it was registered; a binary that no longer hashes to
    /// this is not this app. Nil for a development entry, which trusts the path alone.
    public var executableDigest: Data?
    /// The application identifier (`TEAMID.bundle.id` on iOS); the first access group when no group is
    /// given.
    public var applicationIdentifier: String
    /// The `keychain-access-groups` entitlement, in order: the first is the default group for new items.
    public var accessGroups: [String]

    public init(executablePath: String, executableDigest: Data?, applicationIdentifier: String, accessGroups: [String])
    {
        self.executablePath = executablePath
        self.executableDigest = executableDigest
        self.applicationIdentifier = applicationIdentifier
        self.accessGroups = accessGroups
    }

    /// Whether this entry trusts a path whatever its contents (development mode).
    public var trustsPathOnly: Bool { executableDigest == nil }

    /// The groups the daemon grants: the access groups, else the application identifier alone.
    public var identity: ClientIdentity {
        ClientIdentity(accessGroups: accessGroups.isEmpty ? [applicationIdentifier] : accessGroups)
    }
}

/// What `security app register` asks of the daemon. The daemon hashes the executable itself: a digest
/// from the client would be a claim.
public struct AppRegistrationRequest: Sendable, Codable {
    public var executablePath: String
    public var applicationIdentifier: String
    public var accessGroups: [String]
    /// Development mode: trust the path, not the contents (a rebuilt test binary keeps its groups).
    public var trustPathOnly: Bool
    /// The keychain's passcode, which a system daemon asks of a user before changing their registry.
    public var passcode: SecureBytes?

    public init(
        executablePath: String, applicationIdentifier: String, accessGroups: [String], trustPathOnly: Bool,
        passcode: SecureBytes?
    ) {
        self.executablePath = executablePath
        self.applicationIdentifier = applicationIdentifier
        self.accessGroups = accessGroups
        self.trustPathOnly = trustPathOnly
        self.passcode = passcode
    }
}
