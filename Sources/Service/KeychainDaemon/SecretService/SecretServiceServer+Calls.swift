import Foundation
import KeychainBytes
import KeychainCore
import KeychainDBus

/// A prompt a caller was given (`Unlock` on a locked keychain): valid for that caller's connection
/// only, run when it calls `Prompt`, ended by `Dismiss` or by the connection leaving.
final class SecretServicePrompt {
    let owner: String
    /// The objects that were asked to be unlocked.
    let objects: [String]
    var started = false
    var dismissed = false

    init(owner: String, objects: [String]) {
        self.owner = owner
        self.objects = objects
    }
}

extension SecretServiceServer {
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let sessionInterface = "org.freedesktop.Secret.Session"
    static let promptInterface = "org.freedesktop.Secret.Prompt"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let introspectableInterface = "org.freedesktop.DBus.Introspectable"

    typealias Answer = Result<[DBusValue], SecretServiceError>
    static let maximumObjectsPerCall = 1_000

    /// Answers one call from a caller served as `client`.
    func handle(_ call: DBusMessage, as client: ClientIdentity, sender: String) -> Answer {
        Result { () throws(SecretServiceError) -> [DBusValue] in
            let document = try keychainCall { try state.read() }
            guard let path = call.path, let member = call.member else {
                throw SecretServiceError(.unknownMethod, "a call without a path or member")
            }
            let object = SecretServicePath.parse(path, aliases: document.aliases)
            let store = SecretServiceStore(
                keychain: tenant.keychain, client: client, collections: Set(document.collections.map(\.id)))
            let context = CallContext(
                call: call, sender: sender, member: member, object: object, store: store, document: document)
            // A call may leave out the interface: the object's own is meant.
            let interface: String?
            switch (call.interface, object) {
            case (.some(let given), _): interface = given
            case (nil, .service): interface = Self.serviceInterface
            case (nil, .collection): interface = Self.collectionInterface
            case (nil, .item): interface = Self.itemInterface
            case (nil, .session): interface = Self.sessionInterface
            case (nil, .prompt): interface = Self.promptInterface
            case (nil, .unknown): interface = nil
            }
            if path == Self.portalPath {
                guard interface == Self.portalInterface else {
                    throw SecretServiceError(.unknownMethod, "no interface \(interface ?? "(none)") at \(path)")
                }
                return try portalCall(call, as: client)
            }
            switch interface {
            case Self.introspectableInterface:
                return try handleIntrospection(call).get()
            case Self.propertiesInterface:
                return try properties(context)
            case Self.serviceInterface:
                guard object == .service else { throw noSuchObject(path) }
                return try serviceCall(context)
            case Self.collectionInterface:
                return try collectionCall(context)
            case Self.itemInterface:
                return try itemCall(context)
            case Self.sessionInterface:
                guard case .session(let path) = object, let session = sessions[path], session.owner == sender else {
                    throw noSuchObject(path)
                }
                try expect(context, member == "Close" ? "" : "-")
                sessions[path] = nil
                sessionsBySender[sender, default: 1] -= 1
                return []
            case Self.promptInterface:
                return try promptCall(context)
            default:
                throw SecretServiceError(.unknownMethod, "no interface \(call.interface ?? "(none)") at \(path)")
            }
        }
    }

    struct CallContext {
        let call: DBusMessage
        let sender: String
        let member: String
        let object: SecretServicePath.Object
        let store: SecretServiceStore
        let document: SecretServiceState.Document
        var body: [DBusValue] { call.body }
    }

    func noSuchObject(_ path: String) -> SecretServiceError {
        SecretServiceError(.noSuchObject, "no such object: \(path)")
    }

    /// Throws `InvalidArgs` unless the call's body has `signature`.
    func expect(_ context: CallContext, _ signature: String) throws(SecretServiceError) {
        guard context.call.signature == signature else {
            throw SecretServiceError(
                .invalidArguments, "\(context.member) takes (\(signature)), not (\(context.call.signature))")
        }
    }

    /// Runs keychain code: its refusals become the bus's errors (anything else is a failure, named).
    func keychainCall<T>(_ body: () throws -> T) throws(SecretServiceError) -> T {
        do { return try KeychainDaemon.engine(body) } catch { throw SecretServiceError(error) }
    }

    var isLocked: Bool {
        let state = tenant.keychain.status.lockState
        return state == .locked || state == .beforeFirstUnlock
    }

    func ensureUnlocked() throws(SecretServiceError) {
        guard !isLocked else {
            throw SecretServiceError(
                .isLocked, "the keychain is locked: unlock it first (Unlock, or security unlock-keychain)")
        }
    }

    // MARK: Service

    private func serviceCall(_ context: CallContext) throws(SecretServiceError) -> [DBusValue] {
        let body = context.body
        switch context.member {
        case "OpenSession":
            try expect(context, "sv")
            guard case .string(let algorithm) = body[0], case .variant(let input) = body[1] else {
                throw SecretServiceError(.invalidArguments, "OpenSession takes (sv)")
            }
            guard sessionsBySender[context.sender, default: 0] < Self.maximumSessionsPerConnection else {
                throw SecretServiceError(
                    .limitsExceeded,
                    "more than \(Self.maximumSessionsPerConnection) sessions open on one connection: close some")
            }
            let (session, output) = try SecretServiceSession.open(
                owner: context.sender, algorithm: algorithm, input: input.data)
            let path = newPath(SecretServicePath.sessionPrefix, "s")
            sessions[path] = session
            sessionsBySender[context.sender, default: 0] += 1
            return [.variant(output.map { .bytes($0) } ?? .string("")), .objectPath(path)]
        case "SearchItems":
            try expect(context, "a{ss}")
            let attributes = try stringMap(body[0])
            try ensureUnlocked()
            let items = try keychainCall { try context.store.search(attributes, collection: nil) }
            let paths = items.map {
                DBusValue.objectPath(SecretServicePath.item(collection: $0.collection, reference: $0.reference))
            }
            return [.array(element: "o", paths), .array(element: "o", [])]
        case "Unlock":
            try expect(context, "ao")
            let objects = try paths(body[0])
            guard isLocked else {
                return [.array(element: "o", objects.map { .objectPath($0) }), .objectPath(SecretServicePath.none)]
            }
            let prompt = try newPrompt(owner: context.sender, objects: objects)
            return [.array(element: "o", []), .objectPath(prompt)]
        case "Lock":
            try expect(context, "ao")
            let objects = try paths(body[0])
            guard tenant.keychain.status.lockState != .noPasscode else {
                // Without a passcode the keychain cannot lock: nothing was locked.
                return [.array(element: "o", []), .objectPath(SecretServicePath.none)]
            }
            tenant.keychain.lock()
            DaemonLog.info("the keychain was locked through the Secret Service by \(context.sender)")
            return [.array(element: "o", objects.map { .objectPath($0) }), .objectPath(SecretServicePath.none)]
        case "GetSecrets":
            try expect(context, "aoo")
            let items = try paths(body[0])
            guard case .objectPath(let sessionPath) = body[1] else {
                throw SecretServiceError(.invalidArguments, "no session")
            }
            let session = try session(sessionPath, of: context.sender)
            try ensureUnlocked()
            var entries: [DBusValue] = []
            for path in items {
                guard
                    case .item(let collection, let reference) = SecretServicePath.parse(
                        path, aliases: context.document.aliases),
                    let item = try keychainCall({ try context.store.item(reference) }), item.collection == collection
                else { continue }
                let secret = try keychainCall { try context.store.secret(reference) }
                entries.append(
                    .dictEntry(
                        key: .objectPath(path),
                        value: try secretValue(secret, item: item, session: session, path: sessionPath)))
            }
            return [.array(element: "{o(oayays)}", entries)]
        case "ReadAlias":
            try expect(context, "s")
            guard case .string(let alias) = body[0] else {
                throw SecretServiceError(.invalidArguments, "ReadAlias takes (s)")
            }
            guard let id = context.document.aliases[alias],
                context.document.collections.contains(where: { $0.id == id })
            else {
                return [.objectPath(SecretServicePath.none)]
            }
            return [.objectPath(SecretServicePath.collection(id))]
        case "SetAlias":
            try expect(context, "so")
            guard case .string(let alias) = body[0], case .objectPath(let target) = body[1] else {
                throw SecretServiceError(.invalidArguments, "SetAlias takes (so)")
            }
            guard SecretServicePath.isElement(alias) else {
                throw SecretServiceError(.invalidArguments, "an alias is letters, digits and _")
            }
            // The default collection is where every app's new items go: no app may point it elsewhere.
            guard alias != "default" else {
                throw SecretServiceError(.accessDenied, "the default alias always names the login collection here")
            }
            let id: String?
            switch SecretServicePath.parse(target, aliases: context.document.aliases) {
            case .collection(let found) where context.document.collections.contains(where: { $0.id == found }):
                id = found
            case _ where target == SecretServicePath.none: id = nil
            default: throw noSuchObject(target)
            }
            try keychainCall {
                try state.change { document in
                    document.aliases[alias] = id
                    if document.aliases.count > SecretServiceState.maximumCollections * 4 {
                        throw KeychainError.invalidParameter("too many aliases")
                    }
                }
            }
            return []
        case "CreateCollection":
            try expect(context, "a{sv}s")
            let properties = try variantMap(body[0])
            guard case .string(let alias) = body[1] else {
                throw SecretServiceError(.invalidArguments, "CreateCollection takes (a{sv}s)")
            }
            let label = properties["org.freedesktop.Secret.Collection.Label"]?.text ?? ""
            if !alias.isEmpty, let existing = context.document.aliases[alias],
                context.document.collections.contains(where: { $0.id == existing })
            {
                return [.objectPath(SecretServicePath.collection(existing)), .objectPath(SecretServicePath.none)]
            }
            guard alias.isEmpty || SecretServicePath.isElement(alias) else {
                throw SecretServiceError(.invalidArguments, "an alias is letters, digits and _")
            }
            let id = try keychainCall {
                try state.change { document in
                    let id = try document.addCollection(
                        label: label, creator: context.store.client.writableGroups.first)
                    if !alias.isEmpty { document.aliases[alias] = id }
                    return id
                }
            }
            let path = SecretServicePath.collection(id)
            emit(SecretServicePath.service, Self.serviceInterface, "CollectionCreated", [.objectPath(path)])
            return [.objectPath(path), .objectPath(SecretServicePath.none)]
        default:
            throw SecretServiceError(.unknownMethod, "no method \(context.member) on the Service")
        }
    }

    func session(_ path: String, of sender: String) throws(SecretServiceError) -> SecretServiceSession {
        guard let session = sessions[path], session.owner == sender else {
            throw SecretServiceError(.noSession, "no session \(path) of this connection")
        }
        return session
    }

    /// A secret as the bus carries it, `(oayays)`, encrypted for `session`.
    func secretValue(_ secret: SecureBytes, item: SecretServiceItem, session: SecretServiceSession, path: String)
        throws(SecretServiceError) -> DBusValue
    {
        let (parameters, value) = try session.encode(secret)
        return .structure([.objectPath(path), .bytes(parameters), .bytes(value), .string(item.contentType)])
    }

    /// A secret a caller sent, `(oayays)`: decrypted in its session, with its content type.
    func receivedSecret(_ value: DBusValue, sender: String) throws(SecretServiceError) -> (SecureBytes, String) {
        guard case .structure(let fields) = value, fields.count == 4, case .objectPath(let path) = fields[0],
            let parameters = fields[1].data, let encrypted = fields[2].data, case .string(let contentType) = fields[3]
        else { throw SecretServiceError(.invalidArguments, "a secret is (oayays)") }
        guard encrypted.count <= SecretServiceStore.maximumSecret + 32 else {
            throw SecretServiceError(.invalidArguments, "a secret over \(SecretServiceStore.maximumSecret) bytes")
        }
        guard contentType.utf8.count <= 256 else {
            throw SecretServiceError(.invalidArguments, "a content type over 256 bytes")
        }
        let session = try session(path, of: sender)
        return (try session.decode(parameters: parameters, value: encrypted), contentType)
    }

    private func newPrompt(owner: String, objects: [String]) throws(SecretServiceError) -> String {
        guard prompts.values.filter({ $0.owner == owner }).count < Self.maximumPromptsPerConnection else {
            throw SecretServiceError(.limitsExceeded, "too many prompts open on one connection")
        }
        let path = newPath(SecretServicePath.promptPrefix, "p")
        prompts[path] = SecretServicePrompt(owner: owner, objects: objects)
        return path
    }

    // MARK: Prompts

    private func promptCall(_ context: CallContext) throws(SecretServiceError) -> [DBusValue] {
        guard case .prompt(let path) = context.object, let prompt = prompts[path], prompt.owner == context.sender else {
            throw noSuchObject(context.call.path ?? "")
        }
        switch context.member {
        case "Prompt":
            try expect(context, "s")
            guard !prompt.started else { return [] }
            prompt.started = true
            guard isLocked else {
                complete(path, prompt, unlocked: true)
                return []
            }
            let keychain = tenant.keychain
            // The asking program's terminal, for a prompt with no graphical session to show it in.
            let terminal: String? =
                if case .granted(_, let caller)? = grants[context.sender] { caller.peer.controllingTerminal } else {
                    nil
                }
            Thread.detachNewThread { [self] in
                let unlocked: Bool
                do {
                    try keychain.unlockByAsking(
                        reason: "unlock the keychain for the Secret Service", terminal: terminal)
                    unlocked = true
                } catch {
                    DaemonLog.info("the Secret Service's unlock prompt ended without an unlock: \(error)")
                    unlocked = false
                }
                // The prompt is looked up again on the server's thread: it may have been dismissed, or
                // its connection may have left, meanwhile.
                post { [self] in
                    guard let prompt = prompts[path], !prompt.dismissed else { return }
                    complete(path, prompt, unlocked: unlocked)
                }
            }
            return []
        case "Dismiss":
            try expect(context, "")
            prompt.dismissed = true
            complete(path, prompt, unlocked: false)
            return []
        default:
            throw SecretServiceError(.unknownMethod, "no method \(context.member) on a Prompt")
        }
    }

    private func complete(_ path: String, _ prompt: SecretServicePrompt, unlocked: Bool) {
        prompts[path] = nil
        let result = DBusValue.array(element: "o", unlocked ? prompt.objects.map { .objectPath($0) } : [])
        emit(path, Self.promptInterface, "Completed", [.boolean(!unlocked), .variant(result)], to: prompt.owner)
    }

    // MARK: Argument decoding

    func stringMap(_ value: DBusValue) throws(SecretServiceError) -> [String: String] {
        guard case .array(_, let entries) = value else {
            throw SecretServiceError(.invalidArguments, "attributes are a{ss}")
        }
        guard entries.count <= SecretServiceAttributes.maximumPairs + 2 else {
            throw SecretServiceError(.invalidArguments, "more than \(SecretServiceAttributes.maximumPairs) attributes")
        }
        var map: [String: String] = [:]
        for entry in entries {
            guard case .dictEntry(.string(let key), .string(let text)) = entry else {
                throw SecretServiceError(.invalidArguments, "attributes are a{ss}")
            }
            map[key] = text
        }
        return map
    }

    func variantMap(_ value: DBusValue) throws(SecretServiceError) -> [String: DBusValue] {
        guard case .array(_, let entries) = value, entries.count <= 64 else {
            throw SecretServiceError(.invalidArguments, "properties are a{sv}, at most 64")
        }
        var map: [String: DBusValue] = [:]
        for entry in entries {
            guard case .dictEntry(.string(let key), .variant(let inner)) = entry else {
                throw SecretServiceError(.invalidArguments, "properties are a{sv}")
            }
            map[key] = inner
        }
        return map
    }

    func paths(_ value: DBusValue) throws(SecretServiceError) -> [String] {
        // Each object costs keychain reads on the bus's thread: a call names at most this many.
        guard case .array(_, let entries) = value, entries.count <= Self.maximumObjectsPerCall else {
            throw SecretServiceError(.invalidArguments, "objects are ao, at most \(Self.maximumObjectsPerCall)")
        }
        var paths: [String] = []
        var seen: Set<String> = []
        for entry in entries {
            guard case .objectPath(let path) = entry else {
                throw SecretServiceError(.invalidArguments, "objects are ao")
            }
            if seen.insert(path).inserted { paths.append(path) }
        }
        return paths
    }
}
