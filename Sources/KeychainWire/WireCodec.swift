import Foundation
import KeychainCore
import KeychainCrypto

/// Requests and answers as frames, and back. Decoding checks every tag, length, count, nesting and
/// string before anything is used, and refuses trailing bytes: a frame decodes completely or not at all.
public enum WireCodec {
    // MARK: Frames

    public static func frame(_ request: KeychainRequest, id: UInt32) -> Data {
        var payload = PayloadWriter()
        payload.request(request)
        return payload.frame(kind: .request, id: id)
    }

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

    /// A whole request frame (header and payload).
    public static func request(from frame: Data) throws(WireError) -> (id: UInt32, request: KeychainRequest) {
        let (header, payload) = try split(frame, expecting: [.request])
        var reader = PayloadReader(payload)
        let request = try reader.request()
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

// MARK: Writing

private struct PayloadWriter {
    /// The frame being built: room for the header first, the payload after it.
    private var writer: ByteWriter

    init() {
        writer = ByteWriter()
        for _ in 0..<WireFormat.headerSize { writer.write(UInt8(0)) }
    }

    /// The whole frame, its header filled in; the writer's own buffer is wiped (it may hold a passcode).
    mutating func frame(kind: FrameKind, id: UInt32) -> Data {
        let header = FrameHeader(kind: kind, requestID: id, payloadLength: writer.count - WireFormat.headerSize)
        var frame = writer.data
        frame.replaceSubrange(0..<WireFormat.headerSize, with: header.encoded)
        writer.wipe()
        return frame
    }

    mutating func string(_ value: String) { writer.writeString(value) }

    mutating func secret(_ value: SecureBytes) { value.withUnsafeBytes { writer.writeBytes($0) } }

    mutating func optionalSecret(_ value: SecureBytes?) {
        writer.write(UInt8(value == nil ? 0 : 1))
        if let value { secret(value) }
    }

    mutating func request(_ request: KeychainRequest) {
        switch request {
        case .add(let attributes):
            writer.write(UInt8(1))
            dictionary(attributes)
        case .copyMatching(let query):
            writer.write(UInt8(2))
            dictionary(query)
        case .update(let query, let attributes):
            writer.write(UInt8(3))
            dictionary(query)
            dictionary(attributes)
        case .delete(let query):
            writer.write(UInt8(4))
            dictionary(query)
        case .status: writer.write(UInt8(5))
        case .lock: writer.write(UInt8(6))
        case .unlock(let passcode):
            writer.write(UInt8(7))
            secret(passcode)
        case .unlockForSession(let passcode):
            writer.write(UInt8(22))
            secret(passcode)
        case .setPasscode(let new, let current):
            writer.write(UInt8(8))
            secret(new)
            optionalSecret(current)
        case .removePasscode(let current):
            writer.write(UInt8(9))
            secret(current)
        case .setEraseAfterFailedAttempts(let enabled, let passcode):
            writer.write(UInt8(10))
            writer.write(UInt8(enabled ? 1 : 0))
            optionalSecret(passcode)
        case .location: writer.write(UInt8(11))
        case .registerApp(let registration):
            // Tag 21 adds the tool options to tag 12; a registration without them keeps the old tag, so
            // that a daemon from before them still takes it.
            let withOptions =
                registration.generalPurposeTool || registration.allowInterpreter
                || registration.approvalReuseSeconds != 0
            writer.write(UInt8(withOptions ? 21 : 12))
            string(registration.executablePath)
            string(registration.applicationIdentifier)
            strings(registration.accessGroups)
            writer.write(UInt8(registration.trustPathOnly ? 1 : 0))
            optionalSecret(registration.passcode)
            if withOptions {
                writer.write(UInt8(registration.generalPurposeTool ? 1 : 0))
                writer.write(UInt8(registration.allowInterpreter ? 1 : 0))
                writer.write(UInt32(clamping: max(registration.approvalReuseSeconds, 0)))
            }
        case .listApps: writer.write(UInt8(13))
        case .removeApp(let path, let passcode):
            writer.write(UInt8(14))
            string(path)
            optionalSecret(passcode)
        case .authenticate(let request):
            writer.write(UInt8(15))
            context(request.context)
            switch request.subject {
            case .policy(let policy):
                writer.write(UInt8(1))
                writer.write(UInt8(policy.rawValue))
            case .accessControl(let accessControl):
                writer.write(UInt8(2))
                writer.write(UInt8(accessControl.protection.rawValue))
                writer.write(UInt64(accessControl.flags))
            }
            writer.write(UInt8(request.preflight ? 1 : 0))
            string(request.reason)
        case .invalidateContext(let reference):
            writer.write(UInt8(16))
            context(reference)
        case .biometry(let command), .companion(let command):
            if case .companion = request { writer.write(UInt8(18)) } else { writer.write(UInt8(17)) }
            switch command {
            case .enroll: writer.write(UInt8(1))
            case .unenroll: writer.write(UInt8(2))
            case .answer(let answer):
                writer.write(UInt8(3))
                string(answer.rawValue)
            case .standingAnswer(let answer):
                writer.write(UInt8(4))
                writer.write(UInt8(answer == nil ? 0 : 1))
                if let answer { string(answer.rawValue) }
            case .status: writer.write(UInt8(5))
            }
        case .generateEnclaveKey(let attributes):
            writer.write(UInt8(19))
            dictionary(attributes)
        case .useEnclaveKey(let query, let operation):
            writer.write(UInt8(20))
            dictionary(query)
            switch operation {
            case .sign(let hash, let input, let data):
                writer.write(UInt8(1))
                writer.write(UInt8(Hash.allCases.firstIndex(of: hash) ?? 0))
                writer.write(UInt8(input == .message ? 1 : 2))
                writer.writeBytes(data)
            case .sharedSecret(let peer):
                writer.write(UInt8(2))
                writer.writeBytes(peer)
            }
        }
    }

    /// An authentication context: its identifier and what it says of itself (the password is a
    /// secret, wiped with the frame).
    mutating func context(_ context: AuthenticationContextReference) {
        withUnsafeBytes(of: context.identifier.uuid) { writer.writeRaw(Data($0)) }
        writer.write(UInt8(context.interactionNotAllowed ? 1 : 0))
        optionalSecret(context.applicationPassword)
        writer.write(UInt8(context.localizedReason == nil ? 0 : 1))
        if let reason = context.localizedReason { string(reason) }
    }

    mutating func strings(_ values: [String]) {
        writer.write(UInt32(values.count))
        for value in values { string(value) }
    }

    mutating func app(_ app: AppRegistration) {
        string(app.executablePath)
        writer.write(UInt8(app.executableDigest == nil ? 0 : 1))
        if let digest = app.executableDigest { writer.writeBytes(digest) }
        string(app.applicationIdentifier)
        strings(app.accessGroups)
    }

    mutating func answer(_ answer: KeychainAnswer) {
        switch answer {
        case .done: writer.write(UInt8(1))
        case .result(let result):
            writer.write(UInt8(2))
            writer.write(UInt8(result == nil ? 0 : 1))
            if let result { self.result(result) }
        case .status(let status):
            writer.write(UInt8(3))
            writer.write(UInt8(LockStateCode.code(status.lockState)))
            writer.write(UInt32(clamping: status.failedAttempts))
            writer.write(UInt8(status.nextAttemptAllowed == nil ? 0 : 1))
            if let next = status.nextAttemptAllowed { writer.write(next.timeIntervalSince1970) }
            writer.write(UInt8(status.wipeAfterFailures ? 1 : 0))
        case .location(let path):
            writer.write(UInt8(4))
            string(path)
        case .apps(let apps):
            // Tag 9 adds each entry's tool options to tag 5, used only when an entry has them.
            let withOptions = apps.contains { $0.isGeneralPurposeTool }
            writer.write(UInt8(withOptions ? 9 : 5))
            writer.write(UInt32(apps.count))
            for app in apps {
                self.app(app)
                if withOptions {
                    writer.write(UInt8(app.isGeneralPurposeTool ? 1 : 0))
                    writer.write(UInt32(clamping: max(app.approvalReuseSeconds ?? 0, 0)))
                }
            }
        case .authentication(let outcome):
            writer.write(UInt8(6))
            writer.write(UInt8(outcome.failure == nil ? 0 : 1))
            if let failure = outcome.failure { writer.write(Int64(failure.rawValue)) }
            writer.write(UInt8(outcome.domainState == nil ? 0 : 1))
            if let state = outcome.domainState { writer.writeBytes(state) }
            writer.write(UInt8(clamping: outcome.biometryType))
        case .biometry(let status):
            writer.write(UInt8(7))
            writer.write(UInt8(status.enrolled ? 1 : 0))
            strings(status.pendingAnswers.map(\.rawValue))
            writer.write(UInt8(status.standingAnswer == nil ? 0 : 1))
            if let answer = status.standingAnswer { string(answer.rawValue) }
            writer.write(UInt8(status.domainState == nil ? 0 : 1))
            if let state = status.domainState { writer.writeBytes(state) }
        case .secret(let bytes):
            writer.write(UInt8(8))
            secret(bytes)
        }
    }

    mutating func result(_ result: ItemResult) {
        switch result {
        case .data(let data):
            writer.write(UInt8(1))
            writer.writeBytes(data)
        case .dictionary(let values):
            writer.write(UInt8(2))
            dictionary(values)
        case .array(let results):
            writer.write(UInt8(3))
            writer.write(UInt32(results.count))
            for result in results { self.result(result) }
        }
    }

    mutating func dictionary(_ values: [String: ItemValue]) {
        writer.write(UInt32(values.count))
        for key in values.keys.sorted() {
            string(key)
            if let value = values[key] { self.value(value) }
        }
    }

    mutating func value(_ value: ItemValue) {
        switch value {
        case .string(let string):
            writer.write(UInt8(1))
            self.string(string)
        case .data(let data):
            writer.write(UInt8(2))
            writer.writeBytes(data)
        case .integer(let number):
            writer.write(UInt8(3))
            writer.write(number)
        case .double(let number):
            writer.write(UInt8(4))
            writer.write(number)
        case .bool(let flag):
            writer.write(UInt8(5))
            writer.write(UInt8(flag ? 1 : 0))
        case .date(let date):
            writer.write(UInt8(6))
            writer.write(date.timeIntervalSince1970)
        case .array(let values):
            writer.write(UInt8(7))
            writer.write(UInt32(values.count))
            for value in values { self.value(value) }
        case .accessControl(let policy):
            writer.write(UInt8(8))
            writer.write(UInt8(policy.protection.rawValue))
            writer.write(UInt64(policy.flags))
        case .authenticationContext(let context):
            writer.write(UInt8(9))
            self.context(context)
        case .valueReference(let reference):
            writer.write(UInt8(10))
            string(reference.kind.rawValue)
            writer.write(UInt8(reference.persistentReference == nil ? 0 : 1))
            if let persistent = reference.persistentReference { writer.writeBytes(persistent) }
        case .null: writer.write(UInt8(11))
        case .unsupported(let name):
            writer.write(UInt8(12))
            string(name)
        }
    }
}

/// Lock states as one byte on the wire.
private enum LockStateCode {
    static let all: [LockState] = [.noPasscode, .beforeFirstUnlock, .unlocked, .locked]

    static func code(_ state: LockState) -> Int { all.firstIndex(of: state) ?? 0 }
}

// MARK: Reading

private struct PayloadReader {
    private var reader: ByteReader
    /// Values left to decode in this frame (`WireFormat.maximumValues`).
    private var budget = WireFormat.maximumValues

    private mutating func spend() throws(WireError) {
        budget -= 1
        guard budget >= 0 else { throw WireError("more than \(WireFormat.maximumValues) values in one frame") }
    }

    init(_ payload: Data) { reader = ByteReader(payload) }

    private mutating func byte() throws(WireError) -> UInt8 {
        do { return try reader.read() } catch { throw WireError("the payload is truncated") }
    }

    private mutating func integer<T>(_ read: (inout ByteReader) throws(ByteReader.Truncated) -> T) throws(WireError)
        -> T
    {
        do { return try read(&reader) } catch { throw WireError("the payload is truncated") }
    }

    private mutating func flag() throws(WireError) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw WireError("a flag is neither 0 nor 1")
        }
    }

    private mutating func bytes() throws(WireError) -> Data {
        do { return try reader.readBytes() } catch { throw WireError("the payload is truncated") }
    }

    private mutating func unsigned() throws(WireError) -> UInt32 {
        try integer { (reader) throws(ByteReader.Truncated) -> UInt32 in try reader.read() }
    }

    private mutating func count() throws(WireError) -> Int {
        let count = Int(try integer { (reader) throws(ByteReader.Truncated) -> UInt32 in try reader.read() })
        guard count <= WireFormat.maximumEntries else { throw WireError("\(count) entries are over the limit") }
        return count
    }

    mutating func string() throws(WireError) -> String {
        let string: String?
        do { string = try reader.readValidString() } catch { throw WireError("the payload is truncated") }
        guard let string else { throw WireError("a string is not UTF-8") }
        return string
    }

    private mutating func secret() throws(WireError) -> SecureBytes {
        var raw = try bytes()
        defer { raw.resetBytes(in: 0..<raw.count) }
        return SecureBytes(copying: raw)
    }

    private mutating func optionalSecret() throws(WireError) -> SecureBytes? {
        try flag() ? try secret() : nil
    }

    func finish() throws(WireError) {
        guard reader.isAtEnd else { throw WireError("bytes follow the payload") }
    }

    mutating func request() throws(WireError) -> KeychainRequest {
        switch try byte() {
        case 1: return .add(attributes: try dictionary(depth: 0))
        case 2: return .copyMatching(query: try dictionary(depth: 0))
        case 3: return .update(query: try dictionary(depth: 0), attributes: try dictionary(depth: 0))
        case 4: return .delete(query: try dictionary(depth: 0))
        case 5: return .status
        case 6: return .lock
        case 7: return .unlock(passcode: try secret())
        case 22: return .unlockForSession(passcode: try secret())
        case 8: return .setPasscode(new: try secret(), current: try optionalSecret())
        case 9: return .removePasscode(current: try secret())
        case 10: return .setEraseAfterFailedAttempts(enabled: try flag(), passcode: try optionalSecret())
        case 11: return .location
        case 12:
            return .registerApp(
                AppRegistrationRequest(
                    executablePath: try string(), applicationIdentifier: try string(), accessGroups: try strings(),
                    trustPathOnly: try flag(), passcode: try optionalSecret()))
        case 21:
            return .registerApp(
                AppRegistrationRequest(
                    executablePath: try string(), applicationIdentifier: try string(), accessGroups: try strings(),
                    trustPathOnly: try flag(), passcode: try optionalSecret(), generalPurposeTool: try flag(),
                    allowInterpreter: try flag(), approvalReuseSeconds: Int(try unsigned())))
        case 13: return .listApps
        case 14: return .removeApp(executablePath: try string(), passcode: try optionalSecret())
        case 15:
            let context = try context()
            let subject: AuthenticationRequest.Subject
            switch try byte() {
            case 1:
                guard let policy = AuthenticationPolicy(rawValue: Int(try byte())) else {
                    throw WireError("unknown authentication policy")
                }
                subject = .policy(policy)
            case 2: subject = .accessControl(try accessControl())
            case let tag: throw WireError("unknown authentication subject \(tag)")
            }
            return .authenticate(
                AuthenticationRequest(context: context, subject: subject, preflight: try flag(), reason: try string()))
        case 16: return .invalidateContext(try context())
        case 17: return .biometry(try sensorCommand())
        case 18: return .companion(try sensorCommand())
        case 19: return .generateEnclaveKey(attributes: try dictionary(depth: 0))
        case 20: return .useEnclaveKey(query: try dictionary(depth: 0), operation: try enclaveKeyOperation())
        case let tag: throw WireError("unknown request \(tag)")
        }
    }

    mutating func answer() throws(WireError) -> KeychainAnswer {
        let tag = try byte()
        switch tag {
        case 1: return .done
        case 2: return .result(try flag() ? try result(depth: 0) : nil)
        case 3:
            let code = Int(try byte())
            guard code < LockStateCode.all.count else { throw WireError("unknown lock state \(code)") }
            let failures = try integer { (reader) throws(ByteReader.Truncated) -> UInt32 in try reader.read() }
            let next: Date? =
                try flag()
                ? Date(
                    timeIntervalSince1970: try integer { (reader) throws(ByteReader.Truncated) -> Double in
                        try reader.read()
                    })
                : nil
            return .status(
                KeybagStatus(
                    lockState: LockStateCode.all[code], failedAttempts: Int(failures), nextAttemptAllowed: next,
                    wipeAfterFailures: try flag()))
        case 4: return .location(try string())
        case 5, 9:
            let withOptions = tag == 9
            let count = try count()
            var apps: [AppRegistration] = []
            for _ in 0..<count {
                let path = try string()
                let digest = try flag() ? try bytes() : nil
                let identifier = try string()
                let groups = try strings()
                let asksUser = withOptions ? try flag() : false
                let reuse = withOptions ? Int(try unsigned()) : 0
                apps.append(
                    AppRegistration(
                        executablePath: path, executableDigest: digest, applicationIdentifier: identifier,
                        accessGroups: groups, asksUser: asksUser, approvalReuseSeconds: reuse))
            }
            return .apps(apps)
        case 6:
            var failure: AuthenticationFailure?
            if try flag() {
                let code = try integer { (reader) throws(ByteReader.Truncated) -> Int64 in try reader.read() }
                guard let known = AuthenticationFailure(rawValue: Int(truncatingIfNeeded: code)),
                    Int64(known.rawValue) == code
                else {
                    throw WireError("unknown authentication failure \(code)")
                }
                failure = known
            }
            return .authentication(
                AuthenticationOutcome(
                    failure: failure, domainState: try flag() ? try bytes() : nil, biometryType: Int(try byte())))
        case 7:
            let enrolled = try flag()
            let pending = try strings().map { (name) throws(WireError) -> SensorAnswer in
                guard let answer = SensorAnswer(rawValue: name) else { throw WireError("unknown sensor answer") }
                return answer
            }
            return .biometry(
                BiometryStatus(
                    enrolled: enrolled, pendingAnswers: pending, standingAnswer: try flag() ? try sensorAnswer() : nil,
                    domainState: try flag() ? try bytes() : nil))
        case 8: return .secret(try secret())
        case let tag: throw WireError("unknown answer \(tag)")
        }
    }

    private mutating func enclaveKeyOperation() throws(WireError) -> EnclaveKeyOperation {
        switch try byte() {
        case 1:
            let index = Int(try byte())
            guard index < Hash.allCases.count else { throw WireError("unknown hash \(index)") }
            let input: SignatureInput
            switch try byte() {
            case 1: input = .message
            case 2: input = .digest
            case let tag: throw WireError("unknown signature input \(tag)")
            }
            return .sign(hash: Hash.allCases[index], input: input, data: try bytes())
        case 2: return .sharedSecret(peerPublicKey: try bytes())
        case let tag: throw WireError("unknown enclave key operation \(tag)")
        }
    }

    private mutating func sensorCommand() throws(WireError) -> BiometryCommand {
        switch try byte() {
        case 1: return .enroll
        case 2: return .unenroll
        case 3: return .answer(try sensorAnswer())
        case 4: return .standingAnswer(try flag() ? try sensorAnswer() : nil)
        case 5: return .status
        case let tag: throw WireError("unknown sensor command \(tag)")
        }
    }

    private mutating func sensorAnswer() throws(WireError) -> SensorAnswer {
        guard let answer = SensorAnswer(rawValue: try string()) else { throw WireError("unknown sensor answer") }
        return answer
    }

    private mutating func context() throws(WireError) -> AuthenticationContextReference {
        let raw: Data
        do { raw = try reader.readRaw(16) } catch { throw WireError("the payload is truncated") }
        let uuid = raw.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
        return AuthenticationContextReference(
            identifier: UUID(uuid: uuid), interactionNotAllowed: try flag(), applicationPassword: try optionalSecret(),
            localizedReason: try flag() ? try string() : nil)
    }

    private mutating func accessControl() throws(WireError) -> AccessControlPolicy {
        guard let protection = ProtectionClass(rawValue: Int(try byte())) else {
            throw WireError("unknown protection class")
        }
        let flags = try integer { (reader) throws(ByteReader.Truncated) -> UInt64 in try reader.read() }
        guard let bits = UInt(exactly: flags) else { throw WireError("access-control flags out of range") }
        return AccessControlPolicy(protection: protection, flags: bits)
    }

    private mutating func strings() throws(WireError) -> [String] {
        let count = try count()
        var values: [String] = []
        for _ in 0..<count { values.append(try string()) }
        return values
    }

    private mutating func result(depth: Int) throws(WireError) -> ItemResult {
        guard depth < WireFormat.maximumDepth else { throw WireError("results nest too deeply") }
        try spend()
        switch try byte() {
        case 1: return .data(try bytes())
        case 2: return .dictionary(try dictionary(depth: depth + 1))
        case 3:
            let count = try count()
            var results: [ItemResult] = []
            for _ in 0..<count { results.append(try result(depth: depth + 1)) }
            return .array(results)
        case let tag: throw WireError("unknown result \(tag)")
        }
    }

    private mutating func dictionary(depth: Int) throws(WireError) -> [String: ItemValue] {
        let count = try count()
        var values: [String: ItemValue] = [:]
        for _ in 0..<count {
            let key = try string()
            guard values[key] == nil else { throw WireError("a key appears twice") }
            values[key] = try value(depth: depth + 1)
        }
        return values
    }

    private mutating func value(depth: Int) throws(WireError) -> ItemValue {
        guard depth < WireFormat.maximumDepth else { throw WireError("values nest too deeply") }
        try spend()
        switch try byte() {
        case 1: return .string(try string())
        case 2: return .data(try bytes())
        case 3: return .integer(try integer { (reader) throws(ByteReader.Truncated) -> Int64 in try reader.read() })
        case 4: return .double(try integer { (reader) throws(ByteReader.Truncated) -> Double in try reader.read() })
        case 5: return .bool(try flag())
        case 6:
            let seconds = try integer { (reader) throws(ByteReader.Truncated) -> Double in try reader.read() }
            guard seconds.isFinite else { throw WireError("a date is not a number") }
            return .date(Date(timeIntervalSince1970: seconds))
        case 7:
            let count = try count()
            var values: [ItemValue] = []
            for _ in 0..<count { values.append(try value(depth: depth + 1)) }
            return .array(values)
        case 8: return .accessControl(try accessControl())
        case 9: return .authenticationContext(try context())
        case 10:
            guard let kind = ValueReference.Kind(rawValue: try string()) else {
                throw WireError("unknown value reference")
            }
            return .valueReference(ValueReference(kind: kind, persistentReference: try flag() ? try bytes() : nil))
        case 11: return .null
        case 12: return .unsupported(try string())
        case let tag: throw WireError("unknown value \(tag)")
        }
    }
}
