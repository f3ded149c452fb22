import Foundation
import KeychainBytes
import KeychainCore
import KeychainDBus
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The freedesktop Secret Service (`org.freedesktop.secrets`, spec 0.2) on a session bus, served from
/// the daemon's keychain: its items are the keychain's generic passwords, its collections follow the
/// keychain's lock state, and each caller sees only the items of its own access groups (a registered
/// app's, or the shared group of programs the user's policy lets in). docs/secret-service.md.
///
/// One thread owns the bus connection and every object (sessions, prompts, the callers' grants): it
/// reads a call, answers it, and runs what the prompt threads hand back. Nothing here is touched from
/// another thread except `posted` and `stopping`.
public final class SecretServiceServer: @unchecked Sendable {
    public static let busName = "org.freedesktop.secrets"

    let daemon: KeychainDaemon
    let tenant: Tenant
    let bus: DBusConnection
    let state: SecretServiceState
    private let callers: SecretServiceCallers
    private let stopping = Atomic<Bool>(false)
    /// Work the prompt threads hand to the server's thread.
    private let posted = Mutex<[@Sendable () -> Void]>([])

    // The server thread's own state.
    var grants: [String: SecretServiceGrant] = [:]
    /// Calls from callers whose executable the user is being asked about, by executable path.
    private var waiting: [String: [DBusMessage]] = [:]
    var sessions: [String: SecretServiceSession] = [:]
    var sessionsBySender: [String: Int] = [:]
    var prompts: [String: SecretServicePrompt] = [:]
    private var nextObject: UInt64 = 0

    /// The most sessions and prompts one connection may hold open: opening more is refused until some
    /// are closed (a connection that ends drops all of its own).
    static let maximumSessionsPerConnection = 64
    static let maximumPromptsPerConnection = 16
    /// Callers whose grants are kept (each holds two descriptors); others are judged again when they call.
    static let maximumGrants = 256
    /// Calls held while the user is asked about their program: per program, and in all.
    static let maximumWaitingPerProgram = 16
    static let maximumWaiting = 256

    /// Whether a value holds a file descriptor anywhere inside it.
    static func carriesDescriptor(_ value: DBusValue) -> Bool {
        switch value {
        case .unixFD: true
        case .array(_, let values), .structure(let values): values.contains(where: carriesDescriptor)
        case .dictEntry(let key, let value): carriesDescriptor(key) || carriesDescriptor(value)
        case .variant(let inner): carriesDescriptor(inner)
        default: false
        }
    }

    /// Connects to the bus at `address` and takes the name: only when no one holds it, or from whoever
    /// does with `replace`. Throws with the reason when the name cannot be had.
    public init(daemon: KeychainDaemon, address: String, replace: Bool) throws {
        guard daemon.configuration.mode == .user else {
            throw KeychainError.notAvailable("the Secret Service is served by a user's own daemon, not --system")
        }
        self.daemon = daemon
        let tenant = try daemon.tenant(for: getuid())
        self.tenant = tenant
        // Descriptors are accepted for the portal backend's RetrieveSecret, which writes into one; in
        // any other call one is dropped with its message.
        bus = try DBusConnection(address: address, acceptingDescriptors: true)
        state = tenant.secretService
        callers = SecretServiceCallers(daemon: daemon, bus: bus, state: state, tenant: tenant)
        try bus.addMatch(
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged'")
        // Taken only when free (or, with `replace`, from an owner that allows it); given up to a later
        // `--replace`, after which this server stops.
        let flags: UInt32 = 0x1 | 0x4 | (replace ? 0x2 : 0)
        let reply = try bus.call(
            .call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RequestName", body: [.string(Self.busName), .uint32(flags)]))
        guard reply.body.first == .uint32(1) || reply.body.first == .uint32(4) else {
            let owner = (try? bus.nameOwner(Self.busName)).flatMap { $0 } ?? "another program"
            throw KeychainError.notAvailable(
                "\(Self.busName) is held by \(owner) on the session bus; --replace takes it over")
        }
        DaemonLog.info("serving \(Self.busName) on the session bus as \(bus.uniqueName)")
    }

    /// Serves until `stop` (or until another service takes the name over); false when the bus failed.
    public func run() -> Bool {
        while !stopping.load(ordering: .acquiring) {
            runPosted()
            let message: DBusMessage?
            do {
                message = try bus.receive(timeout: .milliseconds(100))
            } catch  where error.code == .malformed {
                DaemonLog.warning("the Secret Service skipped a message it could not read: \(error.reason)")
                continue
            } catch {
                DaemonLog.error("the Secret Service lost the session bus: \(error.reason)")
                return false
            }
            guard let message else { continue }
            switch message.kind {
            case .methodCall: dispatch(message)
            case .signal: follow(message)
            default: break
            }
        }
        return true
    }

    public func stop() { stopping.store(true, ordering: .releasing) }

    /// Hands `work` to the server's thread (from a prompt thread).
    func post(_ work: @escaping @Sendable () -> Void) { posted.withLock { $0.append(work) } }

    private func runPosted() {
        let work = posted.withLock { posted in
            defer { posted.removeAll() }
            return posted
        }
        for item in work { item() }
    }

    /// A fresh object path under `prefix`.
    func newPath(_ prefix: String, _ letter: String) -> String {
        nextObject += 1
        return prefix + letter + String(nextObject)
    }

    // MARK: Bus signals

    /// A connection that left takes its grant, sessions and prompts with it; losing the name ends
    /// the service.
    private func follow(_ signal: DBusMessage) {
        guard signal.sender == "org.freedesktop.DBus", signal.interface == "org.freedesktop.DBus" else { return }
        if signal.member == "NameLost", signal.body.first?.text == Self.busName {
            DaemonLog.info("another program took \(Self.busName) over: the Secret Service stops")
            stop()
            return
        }
        guard signal.member == "NameOwnerChanged", signal.body.count == 3, let name = signal.body[0].text,
            signal.body[2].text == "", name.hasPrefix(":")
        else { return }
        forget(name)
    }

    private func forget(_ connection: String) {
        grants[connection] = nil
        sessions = sessions.filter { $0.value.owner != connection }
        sessionsBySender[connection] = nil
        for (path, prompt) in prompts where prompt.owner == connection {
            prompt.dismissed = true
            prompts[path] = nil
        }
        for (path, calls) in waiting {
            let left = calls.filter { $0.sender != connection }
            waiting[path] = left.isEmpty ? nil : left
        }
    }

    // MARK: Calls

    private func dispatch(_ call: DBusMessage) {
        guard let sender = call.sender else { return }
        // Descriptors are for the portal's RetrieveSecret alone: any other call that carries one is
        // refused now, and its descriptors closed with it, rather than held while its caller is judged.
        if call.path != Self.portalPath || call.member != "RetrieveSecret",
            call.body.contains(where: Self.carriesDescriptor)
        {
            answer(call, .failure(SecretServiceError(.invalidArguments, "no call here takes a file descriptor")))
            return
        }
        // Each grant holds a pidfd and a /proc directory: a bounded number are kept, the others made again.
        if grants.count >= Self.maximumGrants, grants[sender] == nil, let evicted = grants.keys.first {
            grants[evicted] = nil
        }
        let grant: SecretServiceGrant
        if let held = grants[sender], case .granted(_, let caller) = held {
            // A connection belongs to the program that first called on it: once its process runs
            // another executable, the connection is refused for good rather than judged again.
            grant =
                caller.hasChangedExecutable
                ? .refused(
                    SecretServiceError(
                        .accessDenied, "the process on this connection runs another program than when it first called"))
                : held
            grants[sender] = grant
        } else if let held = grants[sender], case .refused = held {
            grant = held
        } else {
            grant = callers.grant(for: sender)
            grants[sender] = grant
        }
        switch grant {
        case .refused(let error):
            if call.interface == "org.freedesktop.DBus.Introspectable" {
                answer(call, handleIntrospection(call))
                return
            }
            answer(call, .failure(error))
        case .granted(let client, _):
            answer(call, handle(call, as: client, sender: sender))
        case .needsAnswer(let executable, let caller):
            grants[sender] = nil
            // Calls wait while the user is asked, up to a bound per program and in all.
            guard waiting[executable.path, default: []].count < Self.maximumWaitingPerProgram,
                waiting.values.reduce(0, { $0 + $1.count }) < Self.maximumWaiting
            else {
                answer(
                    call,
                    .failure(
                        SecretServiceError(
                            .limitsExceeded, "too many calls wait for the user's answer about this program")))
                return
            }
            let first = waiting[executable.path] == nil
            waiting[executable.path, default: []].append(call)
            guard first else { return }
            let tenant = tenant
            let state = state
            let pid = caller.pid
            // The program's terminal, for a question with no graphical session to show it in.
            let terminal = caller.peer.controllingTerminal
            Thread.detachNewThread { [self] in
                SecretServiceCallers.askUser(
                    about: executable, pid: pid, terminal: terminal, tenant: tenant, state: state)
                post { [self] in
                    // Every call held for this executable is decided again, now with the answer kept
                    // (or refused, when nothing could ask).
                    let calls = waiting.removeValue(forKey: executable.path) ?? []
                    for call in calls {
                        guard let sender = call.sender else { continue }
                        let grant = callers.grant(for: sender)
                        switch grant {
                        case .needsAnswer:
                            let error = SecretServiceError(
                                .accessDenied,
                                "the user could not be asked whether \(executable.path) may use the Secret Service")
                            grants[sender] = .refused(error)
                            answer(call, .failure(error))
                        default:
                            grants[sender] = grant
                            dispatch(call)
                        }
                    }
                }
            }
        }
    }

    /// Sends the reply or the error to `call`, unless it asked for none.
    func answer(_ call: DBusMessage, _ result: Result<[DBusValue], SecretServiceError>) {
        guard !call.noReplyExpected else { return }
        let message: DBusMessage
        switch result {
        case .success(let body): message = .reply(to: call, body: body)
        case .failure(let error): message = .error(to: call, name: error.code.rawValue, message: error.reason)
        }
        do { try bus.send(message) } catch {
            DaemonLog.warning("the Secret Service could not answer \(call.member ?? "a call"): \(error.reason)")
        }
    }

    /// Emits a signal from `path`.
    func emit(_ path: String, _ interface: String, _ member: String, _ body: [DBusValue], to destination: String? = nil)
    {
        var signal = DBusMessage.signal(path: path, interface: interface, member: member, body: body)
        signal.destination = destination
        _ = try? bus.send(signal)
    }
}
