import Foundation
import KeychainBytes
import KeychainCore
import KeychainDBus

#if canImport(Glibc)
    import Glibc
#endif

/// What one bus connection may do with the Secret Service, decided from the kernel's facts about its
/// process (the bus gives its pid and uid; the executable is then checked as a socket client's is),
/// never from anything it says.
enum SecretServiceGrant {
    /// Served as `client`: a registered app with its own groups, or a program the policy lets into
    /// the shared group.
    case granted(client: ClientIdentity, caller: CallerIdentity)
    case refused(SecretServiceError)
    /// The policy is `ask` and the user has not answered for this executable yet.
    case needsAnswer(RunningExecutable, caller: CallerIdentity)
}

/// Decides grants for bus callers. Runs on the server's thread.
struct SecretServiceCallers {
    let daemon: KeychainDaemon
    let bus: DBusConnection
    let state: SecretServiceState
    let tenant: Tenant

    /// The grant for the connection `sender`.
    func grant(for sender: String) -> SecretServiceGrant {
        let pid: UInt32
        let uid: UInt32
        do {
            pid = try ask("GetConnectionUnixProcessID", sender)
            uid = try ask("GetConnectionUnixUser", sender)
        } catch {
            return .refused(SecretServiceError(.accessDenied, "the bus does not say who \(sender) is: \(error)"))
        }
        guard uid == tenant.uid else {
            return .refused(SecretServiceError(.accessDenied, "uid \(uid) is not this keychain's user"))
        }
        let peer: PeerProcess
        do {
            peer = try PeerProcess(busPeer: Int32(bitPattern: pid), uid: uid)
        } catch {
            return .refused(SecretServiceError(.accessDenied, error.description))
        }
        let caller = CallerIdentity(peer: peer, connection: nil, requiringUndumpable: false)
        // A sandboxed app is known by its Flatpak app id, not by an executable inside its sandbox (whose
        // files the user's processes do not see the same way): it gets a group of its own.
        if let appID = peer.flatpakAppID {
            return flatpakGrant(appID, caller: caller)
        }
        let executable: RunningExecutable
        switch caller.executable {
        case .failure(let error): return .refused(SecretServiceError(.accessDenied, error.reason))
        case .success(let found): executable = found
        }
        // A registered app (not a general-purpose tool, whose entry lends its groups to whatever it is
        // told to run) gets its own groups.
        if let registry = try? daemon.registryEntries(of: tenant),
            let app = try? daemon.itemAccess.registration(of: caller, in: registry),
            !((try? daemon.itemAccess.tools.isGeneralPurposeTool(app, caller: caller)) ?? true)
        {
            var client = app.identity
            client.contextScope = caller.contextScope
            return .granted(client: client, caller: caller)
        }
        let shared = ClientIdentity(
            accessGroups: [SecretServicePolicy.sharedAccessGroup], contextScope: caller.contextScope)
        return policyGrant(
            executable, named: executable.path, client: shared, caller: caller,
            denied:
                "\(executable.path) is not a registered app and the Secret Service policy is deny (security app register, or security app policy secret-service)"
        )
    }

    /// A Flatpak app: only its own group, `flatpak:<app id>`, whatever the policy lets in; asked about
    /// once per app id under `ask`. An app id is a claim of the sandbox's `/.flatpak-info`:
    /// docs/secret-service.md says who can make it.
    private func flatpakGrant(_ appID: String, caller: CallerIdentity) -> SecretServiceGrant {
        guard SecretServiceServer.isAppID(appID) else {
            return .refused(SecretServiceError(.accessDenied, "a sandbox names no valid Flatpak app id"))
        }
        return policyGrant(
            Self.flatpakIdentity(appID), named: "the Flatpak app \(appID)",
            client: ClientIdentity(accessGroups: ["flatpak:" + appID], contextScope: caller.contextScope),
            caller: caller, denied: "the Flatpak app \(appID) is refused: the Secret Service policy is deny")
    }

    /// What the user's policy gives a program that is no registered app (`identity`, as its answers
    /// name it): `client` when allowed, the user's answer under `ask` (or a question), `denied` under deny.
    private func policyGrant(
        _ identity: RunningExecutable, named name: String, client: ClientIdentity, caller: CallerIdentity,
        denied: String
    ) -> SecretServiceGrant {
        let document: SecretServiceState.Document
        do { document = try state.read() } catch {
            return .refused(SecretServiceError(.accessDenied, error.reason))
        }
        switch document.policy {
        case .allow: return .granted(client: client, caller: caller)
        case .deny: return .refused(SecretServiceError(.accessDenied, denied))
        case .ask:
            if state.isRefused(Self.identityKey(identity)) {
                return .refused(
                    SecretServiceError(
                        .accessDenied, "the user refused \(name) the Secret Service (until the daemon restarts)"))
            }
            let digest = Hex.encode(identity.digest)
            guard
                let decision = document.decisions.first(where: {
                    $0.executablePath == identity.path && $0.executableDigest == digest
                })
            else { return .needsAnswer(identity, caller: caller) }
            return decision.allowed
                ? .granted(client: client, caller: caller)
                : .refused(SecretServiceError(.accessDenied, "the user refused \(name) the Secret Service"))
        }
    }

    /// How a Flatpak app is named in the user's answers: `flatpak:<app id>`, with no digest.
    static func flatpakIdentity(_ appID: String) -> RunningExecutable {
        RunningExecutable(path: "flatpak:" + appID, key: ExecutableKey(stat()), digest: Data())
    }

    /// Asks the user whether `executable` may use the Secret Service, and keeps a yes in the state
    /// file; a no (a cancel, or a prompt that could not be shown or answered) holds only until the
    /// daemon restarts. Runs on a worker thread.
    static func askUser(
        about executable: RunningExecutable, pid: Int32, terminal: String?, tenant: Tenant, state: SecretServiceState
    ) {
        let reason =
            executable.path.hasPrefix("flatpak:")
            ? "the Flatpak app \(executable.path.dropFirst(8)) (pid \(pid)) wants to keep its secrets in the Secret Service"
            : "\(executable.path) (pid \(pid)) wants to use the Secret Service (the secrets programs share with it)"
        do {
            try tenant.keychain.approveToolRequest(approvalKey: nil, reason: reason, reuse: .zero, terminal: terminal)
        } catch {
            state.refuse(identityKey(executable))
            DaemonLog.info("\(executable.path) is refused the Secret Service until the daemon restarts: \(error)")
            return
        }
        let decision = SecretServiceState.Decision(
            executablePath: executable.path, executableDigest: Hex.encode(executable.digest), allowed: true)
        do {
            try state.change { document in
                document.decisions.removeAll { $0.executablePath == decision.executablePath }
                if document.decisions.count >= SecretServiceState.maximumDecisions { document.decisions.removeFirst() }
                document.decisions.append(decision)
            }
        } catch {
            DaemonLog.error("the answer for \(executable.path) could not be kept: \(error)")
        }
        DaemonLog.info("the user allowed \(executable.path) the Secret Service")
    }

    /// How an executable is named among the refusals of this run.
    static func identityKey(_ executable: RunningExecutable) -> String {
        executable.path + "\u{0}" + Hex.encode(executable.digest)
    }

    private func ask(_ member: String, _ sender: String) throws -> UInt32 {
        let reply = try bus.call(
            .call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: member, body: [.string(sender)]))
        guard case .uint32(let value) = reply.body.first else {
            throw DBusError(.malformed, "\(member) answered \(reply.signature)")
        }
        return value
    }
}
