import FoundationEssentials
import KeychainBytes

/// One executable the daemon knows: who it is (its application identifier) and which access groups its
/// items may live in. The daemon's app registry holds these; a client's executable is matched against
/// them on every connection, and claims a client makes about itself are never consulted. Codable: the
/// registry file stores entries as JSON.
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
    /// A general-purpose tool (the `security` command, an interpreter registered for a script): it runs
    /// whatever its user tells it to, so any process of that user could use it to read the groups' secrets.
    /// Its reads of secrets are granted only after the user is asked. Nil in entries written before
    /// this existed: false.
    public var asksUser: Bool?
    /// How long an approval of this tool's read holds for further reads from the same terminal
    /// session; nil or 0: every read asks.
    public var approvalReuseSeconds: Int?

    /// An entry as the daemon stores it. The two tool fields are left out of the file unless the
    /// entry is a tool (`asksUser` false stores nil), and a reuse window applies only to a tool.
    public init(
        executablePath: String, executableDigest: Data?, applicationIdentifier: String, accessGroups: [String],
        asksUser: Bool = false, approvalReuseSeconds: Int = 0
    ) {
        self.executablePath = executablePath
        self.executableDigest = executableDigest
        self.applicationIdentifier = applicationIdentifier
        self.accessGroups = accessGroups
        self.asksUser = asksUser ? true : nil
        self.approvalReuseSeconds = asksUser && approvalReuseSeconds > 0 ? approvalReuseSeconds : nil
    }

    /// Whether this entry's reads of secrets are granted only after the user is asked.
    public var isGeneralPurposeTool: Bool { asksUser == true }

    /// Whether this entry trusts a path whatever its contents (development mode).
    public var trustsPathOnly: Bool { executableDigest == nil }

    /// The groups the daemon grants: the access groups, else the application identifier alone.
    public var identity: ClientIdentity {
        ClientIdentity(accessGroups: accessGroups.isEmpty ? [applicationIdentifier] : accessGroups)
    }
}

/// What `security app register` asks of the daemon. The daemon hashes the executable itself: a digest
/// from the client would be a claim.
public struct AppRegistrationRequest: Sendable {
    /// The executable to register, as the user named it; the daemon resolves and hashes it with its own
    /// rights.
    public var executablePath: String
    /// The application identifier to record (`TEAMID.bundle.id` on iOS).
    public var applicationIdentifier: String
    /// The `keychain-access-groups` to grant, in order; empty: the application identifier alone.
    public var accessGroups: [String]
    /// Development mode: trust the path, not the contents (a rebuilt test binary keeps its groups).
    public var trustPathOnly: Bool
    /// The keychain's passcode, which a system daemon asks of a user before changing their registry.
    public var passcode: SecureBytes?
    /// Register as a general-purpose tool: reads of secrets ask the user (`AppRegistration.asksUser`).
    public var generalPurposeTool: Bool
    /// Register a known interpreter (python3, bash, ...), which the daemon otherwise refuses: every
    /// script of the user would run as that app. Such an entry always asks the user.
    public var allowInterpreter: Bool
    /// For a tool: how long an approval holds for the same terminal session (seconds; 0: ask each time).
    public var approvalReuseSeconds: Int

    /// A request as `security app register` builds it from its flags; the defaults register an
    /// ordinary app.
    public init(
        executablePath: String, applicationIdentifier: String, accessGroups: [String], trustPathOnly: Bool,
        passcode: SecureBytes?, generalPurposeTool: Bool = false, allowInterpreter: Bool = false,
        approvalReuseSeconds: Int = 0
    ) {
        self.executablePath = executablePath
        self.applicationIdentifier = applicationIdentifier
        self.accessGroups = accessGroups
        self.trustPathOnly = trustPathOnly
        self.passcode = passcode
        self.generalPurposeTool = generalPurposeTool
        self.allowInterpreter = allowInterpreter
        self.approvalReuseSeconds = approvalReuseSeconds
    }
}
