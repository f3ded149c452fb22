import Foundation
import KeychainBytes
import KeychainCore
import KeychainWire
import XCTest

@testable import KeychainDaemon

/// A connection's process as a test states it: the facts `CallerIdentity` would have found.
final class StatedPeer: PeerIdentity, @unchecked Sendable {
    let uid: uid_t
    let pid: Int32 = 4242
    let contextScope = "test-scope"
    var terminalSession: String? = nil
    let executable: Result<RunningExecutable, KeychainError>
    var hasChangedExecutable = false

    init(uid: uid_t = getuid(), executable: Result<RunningExecutable, KeychainError>) {
        self.uid = uid
        self.executable = executable
    }

    /// A process running the file at `path`, with `digest` as its contents' digest (its own, unless told).
    convenience init(uid: uid_t = getuid(), running path: String, digest: Data? = nil) {
        var info = stat()
        _ = stat(path, &info)
        let digest = digest ?? ExecutableDigests.digest(ofFileAt: path) ?? Data()
        self.init(
            uid: uid, executable: .success(RunningExecutable(path: path, key: ExecutableKey(info), digest: digest)))
    }

    func isKnownTool(_ decide: () -> Bool) -> Bool { decide() }
    func isNewRefusal(_ reason: String) -> Bool { true }
}

/// The daemon's decisions, in this process: a daemon object on a temporary directory, and callers as
/// the test states them (no second process, no second user, no socket unless the test makes one).
/// Each decision is also tested end to end with real processes (AppIsolationTests,
/// GeneralPurposeToolTests, SystemModeTests); these pin the policy itself.
final class DaemonPolicyTests: XCTestCase {
    private var directory = ""
    private var app = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "daemon-policy-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A program of its own (a copy of /bin/true): no interpreter, not the security command.
        app = directory + "/app"
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: app)
        setenv("KEYCHAIN_LOG", "off", 1)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    private func daemon(_ mode: DaemonConfiguration.Mode = .user) throws -> KeychainDaemon {
        try KeychainDaemon(
            configuration: DaemonConfiguration(
                mode: mode, home: directory + "/home", socketPath: directory + "/securityd.sock"))
    }

    private func register(
        _ path: String, groups: [String] = ["TEAM.app"], tool: Bool = false, in daemon: KeychainDaemon
    )
        throws
    {
        _ = try daemon.administer(
            .registerApp(
                AppRegistrationRequest(
                    executablePath: path, applicationIdentifier: "TEAM.app", accessGroups: groups, trustPathOnly: false,
                    passcode: nil, generalPurposeTool: tool)),
            from: StatedPeer(running: path))
    }

    private func code(_ body: () throws(KeychainError) -> KeychainAnswer) -> KeychainError.Code? {
        do {
            _ = try body()
            return nil
        } catch { return error.code }
    }

    private let item: [String: ItemValue] = [
        "class": .string("genp"), "svce": .string("policy"), "acct": .string("a"), "v_Data": .data(Data("s".utf8)),
    ]

    func testAnUnregisteredProgramIsRefusedAndARegisteredOneGetsItsGroups() throws {
        let daemon = try daemon()
        let caller = StatedPeer(running: app)
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.perform(.add(attributes: item), from: caller) },
            .missingEntitlement)
        try register(app, in: daemon)
        var added = item
        added["r_Attributes"] = .bool(true)
        guard case .result(.dictionary(let attributes)?) = try daemon.perform(.add(attributes: added), from: caller)
        else { return XCTFail("no attributes") }
        XCTAssertEqual(attributes["agrp"], .string("TEAM.app"), "the entry's first group, not one the caller named")
        var elsewhere = item
        elsewhere["agrp"] = .string("TEAM.other")
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.perform(.add(attributes: elsewhere), from: caller) },
            .missingEntitlement)
    }

    func testAProgramThatChangedOrCannotBeIdentifiedIsRefused() throws {
        let daemon = try daemon()
        try register(app, in: daemon)
        let changed = StatedPeer(running: app, digest: Data(repeating: 7, count: 32))
        let query: [String: ItemValue] = ["class": .string("genp")]
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.perform(.copyMatching(query: query), from: changed) },
            .missingEntitlement)
        let untrusted = StatedPeer(executable: .failure(.missingEntitlement("process 4242 is being traced")))
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.perform(.copyMatching(query: query), from: untrusted) },
            .missingEntitlement)
        XCTAssertFalse(daemon.isRegisteredApp(untrusted))
        XCTAssertTrue(daemon.isRegisteredApp(StatedPeer(running: app)))
    }

    func testAToolsSecretsWaitForTheUserAndItsAttributeSearchesDoNot() throws {
        let daemon = try daemon()
        try register(app, tool: true, in: daemon)
        let tool = StatedPeer(running: app)
        // No passcode and no biometry to ask with: a read of a secret or a change is refused, not served.
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.perform(.add(attributes: item), from: tool) },
            .authenticationFailed)
        let secrets: [String: ItemValue] = ["class": .string("genp"), "r_Data": .bool(true)]
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.perform(.copyMatching(query: secrets), from: tool) },
            .authenticationFailed)
        // An identity is an add of a private key and a certificate, and a search for identity objects
        // reads the keys: both wait for the user too.
        XCTAssertEqual(
            code { () throws(KeychainError) in
                try daemon.perform(.addIdentity(certificate: ["class": .string("cert")], key: nil), from: tool)
            }, .authenticationFailed)
        // Even for attributes alone: the search reads both halves' items.
        for returning in ["r_Ref", "r_Attributes"] {
            let identities: [String: ItemValue] = ["class": .string("idnt"), returning: .bool(true)]
            XCTAssertEqual(
                code { () throws(KeychainError) in try daemon.perform(.copyMatching(query: identities), from: tool) },
                .authenticationFailed, returning)
        }
        // Attributes alone reveal no secret: searched without asking (and there is nothing to find).
        let attributes: [String: ItemValue] = ["class": .string("genp"), "r_Attributes": .bool(true)]
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.perform(.copyMatching(query: attributes), from: tool) },
            .itemNotFound)
    }

    func testInSystemModeOnlyRootDrivesTheSensorAndAUserChangesTheirRegistryOnlyWithThePasscode() throws {
        let daemon = try daemon(.system)
        let user = StatedPeer(uid: 1000, running: app)
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.administer(.biometry(.enroll), from: user) },
            .missingEntitlement
        )
        XCTAssertNoThrow(try daemon.administer(.biometry(.status), from: user))
        guard
            case .biometry(let status) = try daemon.administer(
                .biometry(.enroll), from: StatedPeer(uid: 0, running: app))
        else { return XCTFail("no status") }
        XCTAssertTrue(status.enrolled)
        let registration = KeychainAdminRequest.registerApp(
            AppRegistrationRequest(
                executablePath: app, applicationIdentifier: "TEAM.app", accessGroups: ["TEAM.app"],
                trustPathOnly: false,
                passcode: nil))
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.administer(registration, from: user) }, .authenticationFailed)
        // Root registers for its own keychain freely; the user's keychain is theirs alone.
        XCTAssertNoThrow(try daemon.administer(registration, from: StatedPeer(uid: 0, running: app)))
        XCTAssertEqual(
            code { () throws(KeychainError) in try daemon.perform(.add(attributes: item), from: user) },
            .missingEntitlement,
            "root's registration is not the user's")
    }

    /// The state-change policy alone: each control decided by the mode and who asks.
    func testTheStateChangePolicyDecidesEachControlByWhoAsks() throws {
        let user = StatedPeer(uid: 1000, running: app)
        let root = StatedPeer(uid: 0, running: app)
        let passcode = SecureBytes(copying: Array("1234".utf8))
        let registration = AppRegistrationRequest(
            executablePath: app, applicationIdentifier: "TEAM.app", accessGroups: ["TEAM.app"], trustPathOnly: false,
            passcode: nil)
        var withPasscode = registration
        withPasscode.passcode = passcode
        func decide(
            _ policy: StateChangePolicy, _ request: KeychainAdminRequest, by caller: StatedPeer,
            passcodeSet: Bool = true
        ) -> Result<StateChangePolicy.Requirement, KeychainError> {
            Result { () throws(KeychainError) in
                try policy.requirement(for: request, by: caller, passcodeSet: passcodeSet)
            }
        }
        func refusal(_ result: Result<StateChangePolicy.Requirement, KeychainError>) -> KeychainError.Code? {
            if case .failure(let error) = result { return error.code }
            return nil
        }

        let userMode = StateChangePolicy(mode: .user, development: false)
        for request: KeychainAdminRequest in [
            .lock, .unlock(passcode: passcode), .setPasscode(new: passcode, current: nil), .biometry(.enroll),
            .companion(.answer(.match)), .registerApp(registration), .removeApp(executablePath: app, passcode: nil),
            .listApps,
        ] {
            XCTAssertEqual(try decide(userMode, request, by: user, passcodeSet: false).get(), .none, request.name)
        }

        let system = StateChangePolicy(mode: .system, development: false)
        XCTAssertEqual(refusal(decide(system, .biometry(.enroll), by: user)), .missingEntitlement)
        XCTAssertEqual(refusal(decide(system, .companion(.standingAnswer(.match)), by: user)), .missingEntitlement)
        XCTAssertEqual(try decide(system, .biometry(.status), by: user).get(), .none)
        XCTAssertEqual(try decide(system, .biometry(.enroll), by: root).get(), .none)
        XCTAssertEqual(
            try decide(StateChangePolicy(mode: .system, development: true), .biometry(.enroll), by: user).get(), .none)
        XCTAssertEqual(
            refusal(decide(system, .registerApp(withPasscode), by: user, passcodeSet: false)), .authenticationFailed,
            "a keychain without a passcode has its registry changed by root only")
        XCTAssertEqual(refusal(decide(system, .registerApp(registration), by: user)), .authenticationFailed)
        XCTAssertEqual(try decide(system, .registerApp(withPasscode), by: user).get(), .passcodeCheck)
        XCTAssertEqual(
            try decide(system, .removeApp(executablePath: app, passcode: passcode), by: user).get(), .passcodeCheck)
        XCTAssertEqual(try decide(system, .registerApp(registration), by: root, passcodeSet: false).get(), .none)
        XCTAssertEqual(
            try decide(system, .setPasscode(new: passcode, current: nil), by: user).get(),
            .firstPasscodeOnlyOnAnEmptyKeychain)
        XCTAssertEqual(try decide(system, .setPasscode(new: passcode, current: nil), by: root).get(), .none)
        XCTAssertEqual(try decide(system, .lock, by: user).get(), .none)
        // A backup and a restore prove the passcode where there is one; a system daemon serves neither yet.
        let backup = KeychainAdminRequest.createBackup(file: .path("/b"), password: nil, passcode: nil)
        let restore = KeychainAdminRequest.restoreBackup(file: .path("/b"), password: nil, passcode: passcode)
        XCTAssertEqual(refusal(decide(userMode, backup, by: user)), .authenticationFailed)
        XCTAssertEqual(try decide(userMode, backup, by: user, passcodeSet: false).get(), .none)
        XCTAssertEqual(try decide(userMode, restore, by: user).get(), .passcodeCheck)
        // A system daemon opens no file for anyone, root included; a passed one needs a user's passcode.
        XCTAssertEqual(refusal(decide(system, restore, by: root)), .invalidParameter)
        let passed = KeychainAdminRequest.restoreBackup(file: .descriptor(3), password: nil, passcode: passcode)
        XCTAssertEqual(try decide(system, passed, by: root, passcodeSet: false).get(), .none)
        XCTAssertEqual(try decide(system, passed, by: user).get(), .passcodeCheck)
        XCTAssertEqual(refusal(decide(system, passed, by: user, passcodeSet: false)), .authenticationFailed)
        XCTAssertEqual(try decide(system, .restart, by: user).get(), .none)
        // Sync: what decides where every item goes, and any app's past versions, as a backup; the rest
        // the user's own.
        for verb in ["enroll", "recover", "approve", "remove", "leave", "history", "reset-guesses"] {
            let bare = KeychainAdminRequest.sync(verb: verb, arguments: [], secret: nil, passcode: nil)
            let proven = KeychainAdminRequest.sync(verb: verb, arguments: [], secret: nil, passcode: passcode)
            XCTAssertEqual(refusal(decide(system, bare, by: user)), .authenticationFailed, verb)
            XCTAssertEqual(try decide(system, proven, by: user).get(), .passcodeCheck, verb)
        }
        for verb in ["now", "status", "devices"] {
            let request = KeychainAdminRequest.sync(verb: verb, arguments: [], secret: nil, passcode: nil)
            XCTAssertEqual(try decide(system, request, by: user).get(), .none, verb)
        }
        XCTAssertEqual(
            try decide(userMode, .eraseAllContentAndSettings(passcode: passcode), by: user).get(), .passcodeCheck)
        XCTAssertEqual(
            refusal(decide(userMode, .eraseAllContentAndSettings(passcode: nil), by: user)), .authenticationFailed)
        XCTAssertEqual(
            try decide(userMode, .eraseAllContentAndSettings(passcode: nil), by: user, passcodeSet: false).get(), .none)
        XCTAssertEqual(
            refusal(decide(system, .eraseAllContentAndSettings(passcode: nil), by: user, passcodeSet: false)),
            .authenticationFailed)
        XCTAssertEqual(
            try decide(system, .eraseAllContentAndSettings(passcode: nil), by: root, passcodeSet: false).get(), .none)
        XCTAssertEqual(try decide(system, .listApps, by: user, passcodeSet: false).get(), .none)
        // A move to another root is decided as an erase.
        XCTAssertEqual(
            refusal(decide(userMode, .migrateDeviceRoot(to: .tpm, passcode: nil), by: user)), .authenticationFailed)
        XCTAssertEqual(
            try decide(userMode, .migrateDeviceRoot(to: .tpm, passcode: nil), by: user, passcodeSet: false).get(), .none
        )
        XCTAssertEqual(
            refusal(decide(system, .migrateDeviceRoot(to: .tpm, passcode: nil), by: user, passcodeSet: false)),
            .authenticationFailed)
    }

    /// An answer larger than a client may decode is replaced by a failure that says so, not sent for the
    /// client to refuse as a broken daemon.
    func testAnAnswerOverTheProtocolsLimitsIsAFailureThatSaysSo() throws {
        let many = ItemResult.array((0..<5000).map { .data(Data("item-\($0)-0123456789".utf8)) })
        let reply = DaemonServer.deliverable(WireCodec.frame(.success(.result(many)), id: 4), id: 4)
        let decoded = try WireCodec.answer(from: reply)
        XCTAssertEqual(decoded.id, 4)
        guard case .failure(let error) = decoded.answer else { return XCTFail("the oversized answer was sent") }
        XCTAssertEqual(error.code, .invalidParameter)
        XCTAssertTrue(error.reason.contains("kSecMatchLimit"), error.reason)
        let few = ItemResult.array((0..<3000).map { .data(Data("item-\($0)-0123456789".utf8)) })
        let fine = WireCodec.frame(.success(.result(few)), id: 5)
        XCTAssertEqual(DaemonServer.deliverable(fine, id: 5), fine, "an answer within the limits goes as it is")
    }

    /// A descriptor that comes with a request naming none ends the connection, and the daemon closes it.
    func testADescriptorARequestDoesNotNameEndsTheConnectionAndIsClosed() throws {
        let daemon = try daemon()
        let server = try DaemonServer(daemon: daemon)
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends), 0)
        let serverEnd = ends[0]
        let finished = DispatchSemaphore(value: 0)
        let caller = StatedPeer(running: app)
        let thread = Thread {
            server.serveFrames(on: serverEnd, as: caller)
            finished.signal()
        }
        thread.start()
        let client = FrameStream(descriptor: ends[1])
        var stray: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &stray), 0)
        try client.writeFrame(WireCodec.frame(.status, id: 11), passing: stray[0], stall: .seconds(5))
        close(stray[0])
        guard
            case .failure(let error) = try WireCodec.answer(
                from: try client.readFrame(idle: .seconds(5), stall: .seconds(5))
            ).answer
        else { return XCTFail("a request with a stray descriptor was served") }
        XCTAssertTrue(error.reason.contains("descriptors"), error.reason)
        XCTAssertEqual(finished.wait(timeout: .now() + 10), .success, "the connection was not closed")
        // The reaper closes it on its own thread: give it the moment it takes.
        var closed = false
        for _ in 0..<100 where !closed {
            closed = send(stray[1], "x", 1, Int32(MSG_NOSIGNAL)) == -1 && errno == EPIPE
            if !closed { usleep(10_000) }
        }
        XCTAssertTrue(closed, "the daemon still holds the descriptor")
        close(stray[1])
        close(ends[0])
        close(ends[1])
        server.stop(deadline: .seconds(1))
    }

    /// What a passed file must be before the daemon touches it.
    func testAPassedFileMustBeTheCallersRegularFileOpenAsTheRequestNeeds() throws {
        let caller = StatedPeer(running: app)
        let path = directory + "/passed.skbk"
        let writable = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(writable, 0)
        defer { close(writable) }
        let create = WireRequest.admin(.createBackup(file: .descriptor(writable), password: nil, passcode: nil))
        let restore = WireRequest.admin(.restoreBackup(file: .descriptor(writable), password: nil, passcode: nil))
        XCTAssertNotNil(PassedFile.fileSystem(of: writable))
        XCTAssertNoThrow(try PassedFile.check(writable, for: create, from: caller).get())
        XCTAssertThrowsError(try PassedFile.check(writable, for: restore, from: caller).get(), "not open for reading")
        let other = StatedPeer(uid: 4242, running: app)
        XCTAssertThrowsError(try PassedFile.check(writable, for: create, from: other).get(), "not the caller's")
        XCTAssertEqual(write(writable, "x", 1), 1)
        XCTAssertThrowsError(try PassedFile.check(writable, for: create, from: caller).get(), "not empty")
        let readable = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(readable) }
        XCTAssertNoThrow(try PassedFile.check(readable, for: restore, from: caller).get())
        let proc = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        defer { close(proc) }
        XCTAssertEqual(PassedFile.fileSystem(of: proc), "proc")
        XCTAssertThrowsError(try PassedFile.check(proc, for: restore, from: caller).get(), "a pseudo-file system")
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(folder) }
        XCTAssertThrowsError(try PassedFile.check(folder, for: restore, from: caller).get(), "not a regular file")
    }

    /// The connection loop itself over a socket pair: frames in, answers out, a bad frame closes it.
    func testTheDaemonServesFramesOverASocketPair() throws {
        let daemon = try daemon()
        try register(app, in: daemon)
        let server = try DaemonServer(daemon: daemon)
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends), 0)
        let serverEnd = ends[0]
        let caller = StatedPeer(running: app)
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            server.serveFrames(on: serverEnd, as: caller)
            finished.signal()
        }
        thread.start()
        let client = FrameStream(descriptor: ends[1])
        func exchange(_ request: WireRequest, id: UInt32) throws -> Result<KeychainAnswer, KeychainError> {
            try client.writeFrame(WireCodec.frame(request, id: id), stall: .seconds(5))
            let answer = try WireCodec.answer(from: try client.readFrame(idle: .seconds(5), stall: .seconds(5)))
            XCTAssertEqual(answer.id, id)
            return answer.answer
        }
        XCTAssertEqual(
            try exchange(.keychain(.status), id: 7).get(),
            .status(try XCTUnwrap(daemon.tenant(for: getuid()).keychain.status)))
        XCTAssertEqual(try exchange(.keychain(.add(attributes: item)), id: 8).get(), .result(nil))
        // A control in its own kind of frame, answered on the same connection.
        guard case .biometry(let sensor) = try exchange(.admin(.biometry(.enroll)), id: 10).get() else {
            return XCTFail("no sensor status")
        }
        XCTAssertTrue(sensor.enrolled)
        guard
            case .result(let answer?) = try exchange(
                .keychain(
                    .copyMatching(query: ["class": .string("genp"), "svce": .string("policy"), "r_Data": .bool(true)])),
                id: 9
            ).get()
        else { return XCTFail("no secret") }
        XCTAssertEqual(answer.bytes, Data("s".utf8))
        // Not a frame: answered with a failure, then closed.
        try client.writeFrame(Data("not a frame at all".utf8), stall: .seconds(5))
        XCTAssertEqual(finished.wait(timeout: .now() + 10), .success, "the connection was not closed")
        close(ends[0])
        close(ends[1])
        server.stop(deadline: .seconds(1))
    }

    /// The command's two halves, registered alike beside each other, share one approval in a terminal
    /// session (the command was one executable before); any other two entries keep their own, and so do
    /// the halves when they differ in anything the approval concerns.
    func testTheCommandsTwoHalvesShareAToolApproval() {
        func entry(_ path: String, _ digest: UInt8, groups: [String] = ["security"], reuse: Int = 300)
            -> AppRegistration
        {
            AppRegistration(
                executablePath: path, executableDigest: Data([digest]), applicationIdentifier: "security",
                accessGroups: groups, asksUser: true, approvalReuseSeconds: reuse)
        }
        let lean = entry("/usr/local/bin/security", 1)
        let full = entry("/usr/local/bin/security-full", 2)
        let pair = [lean, full]
        XCTAssertEqual(ToolApprovalSubject.of(lean, in: pair), "01+02")
        XCTAssertEqual(ToolApprovalSubject.of(full, in: pair), "01+02")
        // Alone, or apart from its other half, each is its own subject.
        XCTAssertEqual(ToolApprovalSubject.of(lean, in: [lean]), "01")
        let elsewhere = entry("/opt/bin/security-full", 2)
        XCTAssertEqual(ToolApprovalSubject.of(lean, in: [lean, elsewhere]), "01")
        // Registered differently: no sharing.
        let otherGroups = entry("/usr/local/bin/security-full", 2, groups: ["TEAM.mail"])
        XCTAssertEqual(ToolApprovalSubject.of(lean, in: [lean, otherGroups]), "01")
        let otherReuse = entry("/usr/local/bin/security-full", 2, reuse: 0)
        XCTAssertEqual(ToolApprovalSubject.of(otherReuse, in: [lean, otherReuse]), "02")
        // Two tools beside each other without the command's full half share nothing.
        let python = entry("/usr/local/bin/python3", 3)
        XCTAssertEqual(ToolApprovalSubject.of(lean, in: [lean, python]), "01")
    }
}
