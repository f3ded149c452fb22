import FoundationEssentials
import KeychainBytes
import KeychainCore

/// Requests and answers as frames, and back. Decoding checks every tag, length, count, nesting and
/// string before anything is used, and refuses trailing bytes: a frame decodes completely or not at all.
public enum WireCodec {
    // MARK: Frames

    public static func frame(_ request: WireRequest, id: UInt32) -> Data {
        var payload = PayloadWriter()
        switch request {
        case .keychain(let request):
            payload.request(request)
            return payload.frame(kind: .request, id: id)
        case .admin(let request):
            payload.adminRequest(request)
            return payload.frame(kind: .adminRequest, id: id)
        }
    }

    public static func frame(_ request: KeychainRequest, id: UInt32) -> Data { frame(.keychain(request), id: id) }

    public static func frame(_ request: KeychainAdminRequest, id: UInt32) -> Data { frame(.admin(request), id: id) }

    public static func frame(_ answer: Result<KeychainAnswer, KeychainError>, id: UInt32) -> Data {
        var payload = PayloadWriter()
        switch answer {
        case .success(let answer):
            payload.answer(answer)
            return payload.frame(kind: .answer, id: id)
        case .failure(let error):
            payload.string(error.code.rawValue)
            payload.string(error.reason)
            return payload.frame(kind: .failure, id: id)
        }
    }

    /// More items than any keychain holds: a count above it is a broken or hostile daemon's.
    public static let maximumProgressCount = 1 << 40

    /// A progress frame: `done` of `total` items of the request `id`.
    public static func progressFrame(done: Int, total: Int, id: UInt32) -> Data {
        var payload = PayloadWriter()
        payload.progress(done: done, total: total)
        return payload.frame(kind: .progress, id: id)
    }

    /// Whether a whole frame is a progress frame (its header checked), without reading its payload.
    public static func isProgress(_ frame: Data) -> Bool {
        (try? FrameHeader(frame))?.kind == .progress
    }

    /// A whole progress frame: the request it is about, and how far it has come (`done` ≤ `total`).
    public static func progress(from frame: Data) throws(WireError) -> (id: UInt32, done: Int, total: Int) {
        let (header, payload) = try split(frame, expecting: [.progress])
        var reader = PayloadReader(payload)
        let (done, total) = try reader.progress()
        try reader.finish()
        guard done <= total, total <= maximumProgressCount else { throw WireError("progress past its total") }
        return (header.requestID, done, total)
    }

    /// A whole request frame (header and payload).
    public static func request(from frame: Data) throws(WireError) -> (id: UInt32, request: WireRequest) {
        let (header, payload) = try split(frame, expecting: [.request, .adminRequest])
        var reader = PayloadReader(payload)
        let request: WireRequest =
            header.kind == .request ? .keychain(try reader.request()) : .admin(try reader.adminRequest())
        try reader.finish()
        return (header.requestID, request)
    }

    /// A whole answer frame (header and payload): the answer, or the error the keychain gave.
    public static func answer(from frame: Data) throws(WireError)
        -> (id: UInt32, answer: Result<KeychainAnswer, KeychainError>)
    {
        let (header, payload) = try split(frame, expecting: [.answer, .failure])
        var reader = PayloadReader(payload)
        let answer: Result<KeychainAnswer, KeychainError>
        if header.kind == .answer {
            answer = .success(try reader.answer())
        } else {
            guard let code = KeychainError.Code(rawValue: try reader.string()) else {
                throw WireError("unknown error code")
            }
            answer = .failure(KeychainError(code, try reader.string()))
        }
        try reader.finish()
        return (header.requestID, answer)
    }

    private static func split(_ frame: Data, expecting kinds: [FrameKind]) throws(WireError) -> (FrameHeader, Data) {
        let header = try FrameHeader(frame)
        guard kinds.contains(header.kind) else { throw WireError("a frame of the wrong kind") }
        guard frame.count == WireFormat.headerSize + header.payloadLength else {
            throw WireError("the payload is not the length the header says")
        }
        return (header, frame.dropFirst(WireFormat.headerSize))
    }
}

// MARK: Tags

/// The first byte of a request's payload.
enum RequestTag: UInt8 {
    case add = 1
    case copyMatching, update, delete, status, location, authenticate, invalidateContext, generateEnclaveKey
    case useEnclaveKey, addIdentity
}

/// The first byte of an admin request's payload (a frame of kind `adminRequest`).
enum AdminRequestTag: UInt8 {
    case lock = 1
    case unlock, unlockForSession, setPasscode, removePasscode, setEraseAfterFailedAttempts, registerApp, listApps
    case removeApp, biometry, companion, createBackup, restoreBackup, restart, eraseAllContentAndSettings
    case migrateDeviceRoot, setSecretServicePolicy, importSecrets, sync
}

/// The first byte of an answer's payload.
enum AnswerTag: UInt8 {
    case done = 1
    case result, status, location, apps, authentication, biometry, secret, backup, restore, imported, syncResult
}

private enum AuthenticationSubjectTag: UInt8 {
    case policy = 1
    case accessControl
}
private enum BackupFileTag: UInt8 {
    case path = 1
    case descriptor
}
private enum SensorCommandTag: UInt8 {
    case enroll = 1
    case unenroll, answer, standingAnswer, status
}
private enum EnclaveOperationTag: UInt8 {
    case sign = 1
    case sharedSecret
}
private enum SignatureInputTag: UInt8 {
    case message = 1
    case digest
}

/// Lock states as one byte on the wire.
private enum LockStateCode {
    static let all: [LockState] = [.noPasscode, .beforeFirstUnlock, .unlocked, .locked]

    static func code(_ state: LockState) -> UInt8 { UInt8(all.firstIndex(of: state) ?? 0) }
}

// MARK: Writing

private struct PayloadWriter {
    /// The frame being built: room for the header first, the payload after it.
    private var writer: ValueWriter

    init() {
        writer = ValueWriter()
        writer.raw(Data(count: WireFormat.headerSize))
    }

    /// The whole frame, its header filled in; the writer's own buffer is wiped (it may hold a passcode).
    mutating func frame(kind: FrameKind, id: UInt32) -> Data {
        let header = FrameHeader(kind: kind, requestID: id, payloadLength: writer.count - WireFormat.headerSize)
        var frame = writer.data
        frame.replaceSubrange(0..<WireFormat.headerSize, with: header.encoded)
        writer.wipe()
        return frame
    }

    mutating func string(_ value: String) { writer.string(value) }

    mutating func progress(done: Int, total: Int) {
        writer.unsigned64(UInt64(clamping: done))
        writer.unsigned64(UInt64(clamping: total))
    }

    private mutating func tag(_ tag: RequestTag) { writer.byte(tag.rawValue) }
    private mutating func adminTag(_ tag: AdminRequestTag) { writer.byte(tag.rawValue) }
    private mutating func answerTag(_ tag: AnswerTag) { writer.byte(tag.rawValue) }

    mutating func request(_ request: KeychainRequest) {
        switch request {
        case .add(let attributes):
            tag(.add)
            writer.dictionary(attributes)
        case .copyMatching(let query):
            tag(.copyMatching)
            writer.dictionary(query)
        case .update(let query, let attributes):
            tag(.update)
            writer.dictionary(query)
            writer.dictionary(attributes)
        case .delete(let query):
            tag(.delete)
            writer.dictionary(query)
        case .addIdentity(let certificate, let key):
            tag(.addIdentity)
            writer.dictionary(certificate)
            writer.optional(key) { $0.dictionary($1) }
        case .status: tag(.status)
        case .location: tag(.location)
        case .authenticate(let request):
            tag(.authenticate)
            writer.context(request.context)
            switch request.subject {
            case .policy(let policy):
                writer.byte(AuthenticationSubjectTag.policy.rawValue)
                writer.byte(UInt8(policy.rawValue))
            case .accessControl(let accessControl):
                writer.byte(AuthenticationSubjectTag.accessControl.rawValue)
                writer.accessControl(accessControl)
            }
            writer.flag(request.preflight)
            string(request.reason)
        case .invalidateContext(let reference):
            tag(.invalidateContext)
            writer.context(reference)
        case .generateEnclaveKey(let attributes):
            tag(.generateEnclaveKey)
            writer.dictionary(attributes)
        case .useEnclaveKey(let query, let operation):
            tag(.useEnclaveKey)
            writer.dictionary(query)
            switch operation {
            case .sign(let hash, let input, let data):
                writer.byte(EnclaveOperationTag.sign.rawValue)
                writer.byte(UInt8(Hash.allCases.firstIndex(of: hash) ?? 0))
                writer.byte((input == .message ? SignatureInputTag.message : .digest).rawValue)
                writer.bytes(data)
            case .sharedSecret(let peer):
                writer.byte(EnclaveOperationTag.sharedSecret.rawValue)
                writer.bytes(peer)
            }
        }
    }

    mutating func adminRequest(_ request: KeychainAdminRequest) {
        switch request {
        case .lock: adminTag(.lock)
        case .unlock(let passcode):
            adminTag(.unlock)
            writer.secret(passcode)
        case .unlockForSession(let passcode):
            adminTag(.unlockForSession)
            writer.secret(passcode)
        case .setPasscode(let new, let current):
            adminTag(.setPasscode)
            writer.secret(new)
            writer.optional(current) { $0.secret($1) }
        case .removePasscode(let current):
            adminTag(.removePasscode)
            writer.secret(current)
        case .setEraseAfterFailedAttempts(let enabled, let passcode):
            adminTag(.setEraseAfterFailedAttempts)
            writer.flag(enabled)
            writer.optional(passcode) { $0.secret($1) }
        case .registerApp(let registration):
            adminTag(.registerApp)
            string(registration.executablePath)
            string(registration.applicationIdentifier)
            writer.strings(registration.accessGroups)
            writer.flag(registration.trustPathOnly)
            writer.optional(registration.passcode) { $0.secret($1) }
            writer.flag(registration.generalPurposeTool)
            writer.flag(registration.allowInterpreter)
            writer.unsigned(UInt32(clamping: max(registration.approvalReuseSeconds, 0)))
        case .listApps: adminTag(.listApps)
        case .setSecretServicePolicy(let policy, let passcode):
            adminTag(.setSecretServicePolicy)
            string(policy.rawValue)
            writer.optional(passcode) { $0.secret($1) }
        case .sync(let verb, let arguments, let secret, let passcode):
            adminTag(.sync)
            string(verb)
            writer.strings(arguments)
            writer.optional(secret) { $0.secret($1) }
            writer.optional(passcode) { $0.secret($1) }
        case .importSecrets(let source, let secrets, let passcode):
            adminTag(.importSecrets)
            string(source)
            writer.unsigned(UInt32(secrets.count))
            for secret in secrets {
                string(secret.collection)
                string(secret.label)
                writer.unsigned(UInt32(secret.attributes.count))
                for (key, value) in secret.attributes.sorted(by: { $0.key < $1.key }) {
                    string(key)
                    string(value)
                }
                writer.secret(secret.secret)
                string(secret.contentType)
                writer.strings(secret.applications)
            }
            writer.optional(passcode) { $0.secret($1) }
        case .removeApp(let path, let passcode, let deletingItems):
            adminTag(.removeApp)
            string(path)
            writer.optional(passcode) { $0.secret($1) }
            writer.flag(deletingItems)
        case .biometry(let command):
            adminTag(.biometry)
            sensorCommand(command)
        case .companion(let command):
            adminTag(.companion)
            sensorCommand(command)
        case .restart: adminTag(.restart)
        case .eraseAllContentAndSettings(let passcode):
            adminTag(.eraseAllContentAndSettings)
            writer.optional(passcode) { $0.secret($1) }
        case .migrateDeviceRoot(let kind, let passcode):
            adminTag(.migrateDeviceRoot)
            writer.byte(kind.rawValue)
            writer.optional(passcode) { $0.secret($1) }
        case .createBackup(let file, let password, let passcode):
            adminTag(.createBackup)
            backupFile(file)
            writer.optional(password) { $0.secret($1) }
            writer.optional(passcode) { $0.secret($1) }
        case .restoreBackup(let file, let password, let passcode):
            adminTag(.restoreBackup)
            backupFile(file)
            writer.optional(password) { $0.secret($1) }
            writer.optional(passcode) { $0.secret($1) }
        }
    }

    /// A path, or the mark of a descriptor that travels beside the frame (its number means nothing to
    /// the peer, and is not sent).
    private mutating func backupFile(_ file: BackupFile) {
        switch file {
        case .path(let path):
            writer.byte(BackupFileTag.path.rawValue)
            string(path)
        case .descriptor: writer.byte(BackupFileTag.descriptor.rawValue)
        }
    }

    private mutating func sensorCommand(_ command: BiometryCommand) {
        switch command {
        case .enroll: writer.byte(SensorCommandTag.enroll.rawValue)
        case .unenroll: writer.byte(SensorCommandTag.unenroll.rawValue)
        case .answer(let answer):
            writer.byte(SensorCommandTag.answer.rawValue)
            string(answer.rawValue)
        case .standingAnswer(let answer):
            writer.byte(SensorCommandTag.standingAnswer.rawValue)
            writer.optional(answer) { $0.string($1.rawValue) }
        case .status: writer.byte(SensorCommandTag.status.rawValue)
        }
    }

    private mutating func app(_ app: AppRegistration) {
        string(app.executablePath)
        writer.optional(app.executableDigest) { $0.bytes($1) }
        string(app.applicationIdentifier)
        writer.strings(app.accessGroups)
        writer.flag(app.isGeneralPurposeTool)
        writer.unsigned(UInt32(clamping: max(app.approvalReuseSeconds ?? 0, 0)))
    }

    mutating func answer(_ answer: KeychainAnswer) {
        switch answer {
        case .done: answerTag(.done)
        case .result(let result):
            answerTag(.result)
            writer.optional(result) { $0.result($1) }
        case .status(let status):
            answerTag(.status)
            writer.byte(LockStateCode.code(status.lockState))
            writer.unsigned(UInt32(clamping: status.failedAttempts))
            writer.optional(status.nextAttemptAllowed) { $0.date($1) }
            writer.flag(status.wipeAfterFailures)
            string(status.deviceRoot)
        case .location(let path):
            answerTag(.location)
            string(path)
        case .apps(let apps):
            answerTag(.apps)
            writer.unsigned(UInt32(apps.count))
            for app in apps { self.app(app) }
        case .authentication(let outcome):
            answerTag(.authentication)
            writer.optional(outcome.failure) { $0.integer(Int64($1.rawValue)) }
            writer.optional(outcome.domainState) { $0.bytes($1) }
            writer.byte(UInt8(clamping: outcome.biometryType))
        case .biometry(let status):
            answerTag(.biometry)
            writer.flag(status.enrolled)
            writer.strings(status.pendingAnswers.map(\.rawValue))
            writer.optional(status.standingAnswer) { $0.string($1.rawValue) }
            writer.optional(status.domainState) { $0.bytes($1) }
        case .secret(let bytes):
            answerTag(.secret)
            writer.secret(bytes)
        case .backup(let summary):
            answerTag(.backup)
            writer.unsigned(UInt32(clamping: summary.formatVersion))
            writer.bytes(withUnsafeBytes(of: summary.keybagUUID.uuid) { Data($0) })
            writer.date(summary.created)
            writer.flag(summary.deviceBound)
            for counts in [summary.itemsPerClass, summary.itemsPerProtection, summary.skipped] {
                writer.unsigned(UInt32(counts.count))
                for (name, count) in counts.sorted(by: { $0.key < $1.key }) {
                    string(name)
                    writer.unsigned(UInt32(clamping: count))
                }
            }
        case .restore(let report):
            answerTag(.restore)
            for count in [
                report.restored, report.notForThisDevice, report.skipped, report.replacedLocal, report.keptLocal,
            ] {
                writer.unsigned(UInt32(clamping: count))
            }
        case .syncResult(let json):
            answerTag(.syncResult)
            writer.bytes(json)
        case .imported(let report):
            answerTag(.imported)
            writer.unsigned(UInt32(clamping: report.imported))
            writer.unsigned(UInt32(report.skipped.count))
            for (reason, count) in report.skipped.sorted(by: { $0.key < $1.key }) {
                string(reason)
                writer.unsigned(UInt32(clamping: count))
            }
        }
    }
}

// MARK: Reading

private struct PayloadReader {
    private var reader: ValueReader

    init(_ payload: Data) {
        reader = ValueReader(
            payload,
            limits: DecodingLimits(
                maximumDepth: WireFormat.maximumDepth, maximumEntries: WireFormat.maximumEntries,
                maximumValues: WireFormat.maximumValues, input: "frame"))
    }

    /// Runs one read, giving its failure as the wire's.
    private mutating func read<T>(_ body: (inout ValueReader) throws(FormatError) -> T) throws(WireError) -> T {
        do { return try body(&reader) } catch { throw WireError(error.reason) }
    }

    private mutating func byte() throws(WireError) -> UInt8 {
        try read { (reader) throws(FormatError) in try reader.byte() }
    }
    private mutating func flag() throws(WireError) -> Bool {
        try read { (reader) throws(FormatError) in try reader.flag() }
    }
    mutating func string() throws(WireError) -> String {
        try read { (reader) throws(FormatError) in try reader.string() }
    }
    private mutating func strings() throws(WireError) -> [String] {
        try read { (reader) throws(FormatError) in try reader.strings() }
    }
    private mutating func bytes() throws(WireError) -> Data {
        try read { (reader) throws(FormatError) in try reader.bytes() }
    }
    private mutating func unsigned() throws(WireError) -> UInt32 {
        try read { (reader) throws(FormatError) in try reader.unsigned() }
    }
    /// The count of a list that follows, within the frame's limits.
    private mutating func count() throws(WireError) -> Int {
        try read { (reader) throws(FormatError) in try reader.count() }
    }
    private mutating func secret() throws(WireError) -> SecureBytes {
        try read { (reader) throws(FormatError) in try reader.secret() }
    }
    private mutating func optionalSecret() throws(WireError) -> SecureBytes? {
        try read { (reader) throws(FormatError) in
            try reader.optional { (reader) throws(FormatError) in try reader.secret() }
        }
    }
    private mutating func optionalBytes() throws(WireError) -> Data? {
        try read { (reader) throws(FormatError) in
            try reader.optional { (reader) throws(FormatError) in try reader.bytes() }
        }
    }
    private mutating func dictionary() throws(WireError) -> [String: ItemValue] {
        try read { (reader) throws(FormatError) in try reader.dictionary() }
    }
    private mutating func context() throws(WireError) -> AuthenticationContextReference {
        try read { (reader) throws(FormatError) in try reader.context() }
    }

    func finish() throws(WireError) {
        guard reader.isAtEnd else { throw WireError("bytes follow the payload") }
    }

    mutating func progress() throws(WireError) -> (done: Int, total: Int) {
        let done = try read { (reader) throws(FormatError) in try reader.unsigned64() }
        let total = try read { (reader) throws(FormatError) in try reader.unsigned64() }
        guard let done = Int(exactly: done), let total = Int(exactly: total) else {
            throw WireError("a progress count out of range")
        }
        return (done, total)
    }

    mutating func request() throws(WireError) -> KeychainRequest {
        let raw = try byte()
        guard let tag = RequestTag(rawValue: raw) else { throw WireError("unknown request \(raw)") }
        switch tag {
        case .add: return .add(attributes: try dictionary())
        case .copyMatching: return .copyMatching(query: try dictionary())
        case .update: return .update(query: try dictionary(), attributes: try dictionary())
        case .delete: return .delete(query: try dictionary())
        case .addIdentity:
            return .addIdentity(
                certificate: try dictionary(),
                key: try read { (reader) throws(FormatError) in
                    try reader.optional { (reader) throws(FormatError) in try reader.dictionary() }
                })
        case .status: return .status
        case .location: return .location
        case .authenticate:
            let context = try context()
            let subject: AuthenticationRequest.Subject
            let raw = try byte()
            switch AuthenticationSubjectTag(rawValue: raw) {
            case .policy?:
                guard let policy = AuthenticationPolicy(rawValue: Int(try byte())) else {
                    throw WireError("unknown authentication policy")
                }
                subject = .policy(policy)
            case .accessControl?:
                subject = .accessControl(try read { (reader) throws(FormatError) in try reader.accessControl() })
            case nil: throw WireError("unknown authentication subject \(raw)")
            }
            return .authenticate(
                AuthenticationRequest(context: context, subject: subject, preflight: try flag(), reason: try string()))
        case .invalidateContext: return .invalidateContext(try context())
        case .generateEnclaveKey: return .generateEnclaveKey(attributes: try dictionary())
        case .useEnclaveKey: return .useEnclaveKey(query: try dictionary(), operation: try enclaveKeyOperation())
        }
    }

    mutating func adminRequest() throws(WireError) -> KeychainAdminRequest {
        let raw = try byte()
        guard let tag = AdminRequestTag(rawValue: raw) else { throw WireError("unknown admin request \(raw)") }
        switch tag {
        case .lock: return .lock
        case .unlock: return .unlock(passcode: try secret())
        case .unlockForSession: return .unlockForSession(passcode: try secret())
        case .setPasscode: return .setPasscode(new: try secret(), current: try optionalSecret())
        case .removePasscode: return .removePasscode(current: try secret())
        case .setEraseAfterFailedAttempts:
            return .setEraseAfterFailedAttempts(enabled: try flag(), passcode: try optionalSecret())
        case .registerApp:
            return .registerApp(
                AppRegistrationRequest(
                    executablePath: try string(), applicationIdentifier: try string(), accessGroups: try strings(),
                    trustPathOnly: try flag(), passcode: try optionalSecret(), generalPurposeTool: try flag(),
                    allowInterpreter: try flag(), approvalReuseSeconds: Int(try unsigned())))
        case .listApps: return .listApps
        case .setSecretServicePolicy:
            let name = try string()
            guard let policy = SecretServicePolicy(rawValue: name) else {
                throw WireError("unknown Secret Service policy")
            }
            return .setSecretServicePolicy(policy, passcode: try optionalSecret())
        case .sync:
            return .sync(
                verb: try string(), arguments: try strings(), secret: try optionalSecret(),
                passcode: try optionalSecret())
        case .importSecrets:
            let source = try string()
            var secrets: [ImportedSecret] = []
            for _ in 0..<(try count()) {
                let collection = try string()
                let label = try string()
                var attributes: [String: String] = [:]
                for _ in 0..<(try count()) { attributes[try string()] = try string() }
                let value = try secret()
                secrets.append(
                    ImportedSecret(
                        collection: collection, label: label, attributes: attributes, secret: value,
                        contentType: try string(), applications: try strings()))
            }
            return .importSecrets(source: source, secrets: secrets, passcode: try optionalSecret())
        case .removeApp:
            return .removeApp(executablePath: try string(), passcode: try optionalSecret(), deletingItems: try flag())
        case .biometry: return .biometry(try sensorCommand())
        case .companion: return .companion(try sensorCommand())
        case .restart: return .restart
        case .eraseAllContentAndSettings: return .eraseAllContentAndSettings(passcode: try optionalSecret())
        case .migrateDeviceRoot:
            let raw = try byte()
            guard let kind = DeviceRootKind(rawValue: raw) else { throw WireError("unknown device root kind \(raw)") }
            return .migrateDeviceRoot(to: kind, passcode: try optionalSecret())
        case .createBackup:
            return .createBackup(file: try backupFile(), password: try optionalSecret(), passcode: try optionalSecret())
        case .restoreBackup:
            return .restoreBackup(
                file: try backupFile(), password: try optionalSecret(), passcode: try optionalSecret())
        }
    }

    mutating func answer() throws(WireError) -> KeychainAnswer {
        let raw = try byte()
        guard let tag = AnswerTag(rawValue: raw) else { throw WireError("unknown answer \(raw)") }
        switch tag {
        case .done: return .done
        case .result:
            return .result(
                try read { (reader) throws(FormatError) in
                    try reader.optional { (reader) throws(FormatError) in try reader.result() }
                })
        case .status:
            let code = Int(try byte())
            guard code < LockStateCode.all.count else { throw WireError("unknown lock state \(code)") }
            let failures = try unsigned()
            let next = try read { (reader) throws(FormatError) in
                try reader.optional { (reader) throws(FormatError) in try reader.date() }
            }
            return .status(
                KeybagStatus(
                    lockState: LockStateCode.all[code], failedAttempts: Int(failures), nextAttemptAllowed: next,
                    wipeAfterFailures: try flag(), deviceRoot: try string()))
        case .location: return .location(try string())
        case .apps:
            let count = try read { (reader) throws(FormatError) in try reader.count() }
            var apps: [AppRegistration] = []
            for _ in 0..<count {
                apps.append(
                    AppRegistration(
                        executablePath: try string(), executableDigest: try optionalBytes(),
                        applicationIdentifier: try string(), accessGroups: try strings(), asksUser: try flag(),
                        approvalReuseSeconds: Int(try unsigned())))
            }
            return .apps(apps)
        case .authentication:
            var failure: AuthenticationFailure?
            if try flag() {
                let code = try read { (reader) throws(FormatError) in try reader.integer() }
                guard let known = AuthenticationFailure(rawValue: Int(truncatingIfNeeded: code)),
                    Int64(known.rawValue) == code
                else {
                    throw WireError("unknown authentication failure \(code)")
                }
                failure = known
            }
            return .authentication(
                AuthenticationOutcome(failure: failure, domainState: try optionalBytes(), biometryType: Int(try byte()))
            )
        case .biometry:
            let enrolled = try flag()
            let pending = try strings().map { (name) throws(WireError) -> SensorAnswer in
                guard let answer = SensorAnswer(rawValue: name) else { throw WireError("unknown sensor answer") }
                return answer
            }
            return .biometry(
                BiometryStatus(
                    enrolled: enrolled, pendingAnswers: pending, standingAnswer: try flag() ? try sensorAnswer() : nil,
                    domainState: try optionalBytes()))
        case .secret: return .secret(try secret())
        case .backup:
            let version = Int(try unsigned())
            let uuidBytes = try bytes()
            guard uuidBytes.count == 16 else { throw WireError("a keybag UUID is 16 bytes") }
            let uuid = uuidBytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            let created = try read { (reader) throws(FormatError) in try reader.date() }
            let deviceBound = try flag()
            var tables: [[String: Int]] = []
            for _ in 0..<3 {
                let count = try read { (reader) throws(FormatError) in try reader.count() }
                var table: [String: Int] = [:]
                var last: String?
                for _ in 0..<count {
                    // In order, each once: the one encoding of a table.
                    let name = try string()
                    guard last.map({ $0 < name }) ?? true else { throw WireError("counts out of order or named twice") }
                    last = name
                    table[name] = Int(try unsigned())
                }
                tables.append(table)
            }
            return .backup(
                BackupSummary(
                    formatVersion: version, keybagUUID: uuid, created: created, deviceBound: deviceBound,
                    itemsPerClass: tables[0], itemsPerProtection: tables[1], skipped: tables[2]))
        case .restore:
            return .restore(
                RestoreReport(
                    restored: Int(try unsigned()), notForThisDevice: Int(try unsigned()), skipped: Int(try unsigned()),
                    replacedLocal: Int(try unsigned()), keptLocal: Int(try unsigned())))
        case .syncResult:
            return .syncResult(try bytes())
        case .imported:
            let imported = Int(try unsigned())
            var skipped: [String: Int] = [:]
            for _ in 0..<(try count()) { skipped[try string()] = Int(try unsigned()) }
            return .imported(ImportReport(imported: imported, skipped: skipped))
        }
    }

    private mutating func enclaveKeyOperation() throws(WireError) -> EnclaveKeyOperation {
        let raw = try byte()
        switch EnclaveOperationTag(rawValue: raw) {
        case .sign?:
            let index = Int(try byte())
            guard index < Hash.allCases.count else { throw WireError("unknown hash \(index)") }
            let inputTag = try byte()
            let input: SignatureInput
            switch SignatureInputTag(rawValue: inputTag) {
            case .message?: input = .message
            case .digest?: input = .digest
            case nil: throw WireError("unknown signature input \(inputTag)")
            }
            return .sign(hash: Hash.allCases[index], input: input, data: try bytes())
        case .sharedSecret?: return .sharedSecret(peerPublicKey: try bytes())
        case nil: throw WireError("unknown enclave key operation \(raw)")
        }
    }

    /// A path, or `.descriptor(-1)`: the receiver puts in the descriptor that came beside the frame.
    private mutating func backupFile() throws(WireError) -> BackupFile {
        let raw = try byte()
        switch BackupFileTag(rawValue: raw) {
        case .path?: return .path(try string())
        case .descriptor?: return .descriptor(-1)
        case nil: throw WireError("unknown backup file \(raw)")
        }
    }

    private mutating func sensorCommand() throws(WireError) -> BiometryCommand {
        let raw = try byte()
        switch SensorCommandTag(rawValue: raw) {
        case .enroll?: return .enroll
        case .unenroll?: return .unenroll
        case .answer?: return .answer(try sensorAnswer())
        case .standingAnswer?: return .standingAnswer(try flag() ? try sensorAnswer() : nil)
        case .status?: return .status
        case nil: throw WireError("unknown sensor command \(raw)")
        }
    }

    private mutating func sensorAnswer() throws(WireError) -> SensorAnswer {
        guard let answer = SensorAnswer(rawValue: try string()) else { throw WireError("unknown sensor answer") }
        return answer
    }
}
