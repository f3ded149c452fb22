import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainWire
import XCTest

/// The daemon protocol's frames: every request and answer survives the trip; garbage, truncated,
/// oversized and malformed frames are refused with a reason, never a crash.
final class WireCodecTests: XCTestCase {
    private let query: [String: ItemValue] = [
        "class": .string("genp"), "svce": .string("wire"), "acct": .string("a"), "v_Data": .data(Data([0, 1, 2, 255])),
        "r_Data": .bool(true), "m_Limit": .integer(-3), "weight": .double(2.5),
        "cdat": .date(Date(timeIntervalSince1970: 1_800_000_000.25)), "list": .array([.string("x"), .null]),
        "accc": .accessControl(AccessControlPolicy(protection: .whenUnlockedThisDeviceOnly, flags: 1 << 3)),
        "u_AuthCtx": .authenticationContext(AuthenticationContextReference()),
        "v_Ref": .valueReference(ValueReference(kind: .certificate, persistentReference: Data("cert".utf8))),
        "odd": .unsupported("NSURL"),
    ]

    private func requests() -> [WireRequest] {
        let keychainRequests: [KeychainRequest] = [
            .add(attributes: query), .copyMatching(query: query),
            .update(query: query, attributes: ["labl": .string("l")]),
            .delete(query: [:]), .status, .location,
            .addIdentity(certificate: ["class": .string("cert"), "v_Data": .data(Data([0x30]))], key: query),
            .addIdentity(certificate: [:], key: nil),
            .authenticate(
                AuthenticationRequest(
                    context: AuthenticationContextReference(
                        interactionNotAllowed: true, applicationPassword: SecureBytes(copying: Array("pw".utf8)),
                        localizedReason: "Sign in"),
                    subject: .policy(.biometricsOrCompanion), preflight: true, reason: "why")),
            .authenticate(
                AuthenticationRequest(
                    context: AuthenticationContextReference(),
                    subject: .accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: 1 << 31 | 1 << 3)),
                    preflight: false, reason: "")),
            .invalidateContext(AuthenticationContextReference()),
            .generateEnclaveKey(attributes: ["tkid": .string(enclaveTokenID), "atag": .data(Data("t".utf8))]),
            .useEnclaveKey(
                query: ["v_PersistentRef": .data(Data([1, 2])), "u_OpPrompt": .string("Sign")],
                operation: .sign(hash: .sha384, input: .digest, data: Data(repeating: 7, count: 48))),
            .useEnclaveKey(query: [:], operation: .sign(hash: .sha1, input: .message, data: Data())),
            .useEnclaveKey(query: query, operation: .sharedSecret(peerPublicKey: Data([4]) + Data(count: 64))),
        ]
        let adminRequests: [KeychainAdminRequest] = [
            .unlock(passcode: SecureBytes(copying: Array("1234".utf8))), .lock,
            .unlockForSession(passcode: SecureBytes(copying: [5])),
            .setPasscode(new: SecureBytes(copying: [1, 2]), current: nil),
            .setPasscode(new: SecureBytes(copying: [1, 2]), current: SecureBytes(copying: [3])),
            .removePasscode(current: SecureBytes(copying: [9])),
            .setEraseAfterFailedAttempts(enabled: true, passcode: nil),
            .registerApp(
                AppRegistrationRequest(
                    executablePath: "/usr/bin/app", applicationIdentifier: "TEAM.app", accessGroups: ["TEAM.app", "g"],
                    trustPathOnly: true, passcode: SecureBytes(copying: [7]), generalPurposeTool: true,
                    allowInterpreter: true, approvalReuseSeconds: 30)),
            .listApps, .removeApp(executablePath: "/usr/bin/app", passcode: nil),
            .removeApp(executablePath: "/usr/bin/app", passcode: SecureBytes(copying: [6]), deletingItems: true),
            .biometry(.enroll), .biometry(.unenroll), .biometry(.answer(.cancel)), .biometry(.standingAnswer(.match)),
            .biometry(.standingAnswer(nil)), .biometry(.status), .companion(.enroll), .companion(.answer(.match)),
            .companion(.status),
            .createBackup(file: .path("/b.skbk"), password: SecureBytes(copying: [1, 2]), passcode: nil),
            .restoreBackup(file: .path("/b.skbk"), password: nil, passcode: SecureBytes(copying: [3])),
            .createBackup(file: .descriptor(-1), password: nil, passcode: nil),
            .restoreBackup(file: .descriptor(-1), password: SecureBytes(copying: [5]), passcode: nil),
            .restart, .eraseAllContentAndSettings(passcode: nil),
            .eraseAllContentAndSettings(passcode: SecureBytes(copying: [4])),
            .migrateDeviceRoot(to: .tpm, passcode: nil),
            .migrateDeviceRoot(to: .software, passcode: SecureBytes(copying: [8])),
        ]
        return keychainRequests.map(WireRequest.keychain) + adminRequests.map(WireRequest.admin)
    }

    func testAContextKeepsWhatItSaysOfItselfOnTheWire() throws {
        let context = AuthenticationContextReference(
            interactionNotAllowed: true, applicationPassword: SecureBytes(copying: Array("hunter2".utf8)),
            localizedReason: "Read")
        let frame = WireCodec.frame(.copyMatching(query: ["u_AuthCtx": .authenticationContext(context)]), id: 1)
        guard case .keychain(.copyMatching(let query)) = try WireCodec.request(from: frame).request,
            case .authenticationContext(let decoded)? = query["u_AuthCtx"]
        else { return XCTFail("no context") }
        XCTAssertEqual(decoded.identifier, context.identifier)
        XCTAssertTrue(decoded.interactionNotAllowed)
        XCTAssertEqual(decoded.localizedReason, "Read")
        XCTAssertEqual(
            decoded.applicationPassword.map { Array($0.withUnsafeBytes { Data($0) }) }, Array("hunter2".utf8))
        // An authentication failure the protocol does not know is refused, not guessed.
        var answer = WireCodec.frame(
            .success(.authentication(AuthenticationOutcome(failure: .userCancel, domainState: nil, biometryType: 2))),
            id: 2)
        let codeOffset = WireFormat.headerSize + 2
        XCTAssertEqual(answer[codeOffset], UInt8(bitPattern: -2))
        answer[codeOffset] = 0x7f
        XCTAssertThrowsError(try WireCodec.answer(from: answer))
    }

    private func same(_ first: WireRequest, _ second: WireRequest) -> Bool {
        // Requests hold SecureBytes, which compare by identity: compare their encodings instead.
        WireCodec.frame(first, id: 0) == WireCodec.frame(second, id: 0)
    }

    func testEveryRequestSurvivesTheTrip() throws {
        for (index, request) in requests().enumerated() {
            let frame = WireCodec.frame(request, id: UInt32(index))
            let decoded = try WireCodec.request(from: frame)
            XCTAssertEqual(decoded.id, UInt32(index))
            XCTAssertEqual(decoded.request.name, request.name)
            XCTAssertTrue(same(decoded.request, request), request.name)
        }
        guard
            case .keychain(.add(let attributes)) = try WireCodec.request(
                from: WireCodec.frame(.add(attributes: query), id: 1)
            ).request
        else { return XCTFail() }
        XCTAssertEqual(attributes, query)
        let unlock = WireCodec.frame(.unlock(passcode: SecureBytes(copying: Array("1234".utf8))), id: 1)
        guard case .admin(.unlock(let passcode)) = try WireCodec.request(from: unlock).request else { return XCTFail() }
        XCTAssertTrue(passcode.constantTimeEquals(SecureBytes(copying: Array("1234".utf8))))
    }

    /// The controls travel in frames of their own kind, with tags of their own: an app's request and a
    /// control never share a tag, so neither can be read as the other.
    func testControlsTravelAsAdminFramesWithTagsOfTheirOwn() throws {
        let lock = WireCodec.frame(.lock, id: 1)
        XCTAssertEqual(lock[5], FrameKind.adminRequest.rawValue)
        XCTAssertEqual(Array(lock.dropFirst(WireFormat.headerSize)), [1], "lock is the first admin tag")
        let status = WireCodec.frame(.status, id: 1)
        XCTAssertEqual(status[5], FrameKind.request.rawValue)
        // The same payload byte is a different request in each kind of frame: an add's payload in an
        // admin frame is a lock with bytes after it, refused, never an add.
        var add = WireCodec.frame(.add(attributes: [:]), id: 1)
        XCTAssertEqual(add[WireFormat.headerSize], 1, "add is the first request tag")
        add[5] = FrameKind.adminRequest.rawValue
        XCTAssertThrowsError(try WireCodec.request(from: add)) { error in
            XCTAssertTrue("\(error)".contains("bytes follow the payload"), "\(error)")
        }
        guard case .admin(.lock) = try WireCodec.request(from: frame(payload: [1], kind: .adminRequest)).request else {
            return XCTFail("tag 1 of an admin frame is lock")
        }
        XCTAssertThrowsError(try WireCodec.request(from: frame(payload: [20], kind: .adminRequest))) { error in
            XCTAssertTrue("\(error)".contains("unknown admin request 20"), "\(error)")
        }
        // Tag 19 is a sync command: its verb, arguments, recovery secret and passcode travel.
        let sync = WireCodec.frame(
            .sync(
                verb: "enroll", arguments: ["/run/sync.sock", "alice", "laptop"],
                secret: SecureBytes(copying: Array("recovery".utf8)), passcode: nil), id: 1)
        XCTAssertEqual(sync[WireFormat.headerSize], 19)
        guard case .admin(.sync("enroll", let arguments, let secret?, nil)) = try WireCodec.request(from: sync).request
        else { return XCTFail("the sync command did not travel") }
        XCTAssertEqual(arguments, ["/run/sync.sock", "alice", "laptop"])
        XCTAssertTrue(secret.constantTimeEquals(SecureBytes(copying: Array("recovery".utf8))))
        // The Secret Service policy (tag 17) travels by name; a name this build does not know is refused.
        let policy = WireCodec.frame(.setSecretServicePolicy(.deny, passcode: nil), id: 1)
        guard case .admin(.setSecretServicePolicy(.deny, nil)) = try WireCodec.request(from: policy).request else {
            return XCTFail("the policy did not travel")
        }
        XCTAssertThrowsError(
            try WireCodec.request(from: frame(payload: [17, 2, 0, 0, 0, 0x6e, 0x6f, 0], kind: .adminRequest))
        ) { error in
            XCTAssertTrue("\(error)".contains("unknown Secret Service policy"), "\(error)")
        }
        // A device root kind it does not know (migrateDeviceRoot is tag 16).
        XCTAssertThrowsError(try WireCodec.request(from: frame(payload: [16, 9, 0], kind: .adminRequest))) { error in
            XCTAssertTrue("\(error)".contains("unknown device root kind 9"), "\(error)")
        }
        XCTAssertThrowsError(try WireCodec.request(from: frame(payload: [12]))) { error in
            XCTAssertTrue("\(error)".contains("unknown request 12"), "\(error)")
        }
    }

    private func answers() -> [KeychainAnswer] {
        [
            .done, .result(nil), .result(.data(Data("secret".utf8))),
            .result(.array([.dictionary(query), .data(Data()), .array([])])),
            .status(
                KeybagStatus(
                    lockState: .locked, failedAttempts: 5, nextAttemptAllowed: Date(timeIntervalSince1970: 1e9),
                    wipeAfterFailures: true)),
            .status(
                KeybagStatus(
                    lockState: .noPasscode, failedAttempts: 0, nextAttemptAllowed: nil, wipeAfterFailures: false)),
            .location("/home/u/.local/share/keychain/keychain.db"),
            .authentication(AuthenticationOutcome(failure: nil, domainState: Data([1, 2, 3]), biometryType: 2)),
            .authentication(AuthenticationOutcome(failure: .notInteractive, domainState: nil, biometryType: 0)),
            .biometry(
                BiometryStatus(
                    enrolled: true, pendingAnswers: [.match, .nomatch], standingAnswer: .cancel, domainState: Data([9]))
            ),
            .biometry(BiometryStatus(enrolled: false, pendingAnswers: [], standingAnswer: nil, domainState: nil)),
            .secret(SecureBytes(copying: Array("shared secret".utf8))), .secret(SecureBytes(copying: [])),
            .backup(
                BackupSummary(
                    formatVersion: 1, keybagUUID: UUID(), created: Date(timeIntervalSince1970: 1_800_000_000.5),
                    deviceBound: false, itemsPerClass: ["genp": 6, "inet": 1], itemsPerProtection: ["ak": 3, "dku": 4],
                    skipped: ["needsUser": 2])),
            .backup(
                BackupSummary(
                    formatVersion: 1, keybagUUID: UUID(), created: Date(timeIntervalSince1970: 0), deviceBound: true,
                    itemsPerClass: [:], itemsPerProtection: [:], skipped: [:])),
            .restore(RestoreReport(restored: 4, notForThisDevice: 3, skipped: 1, replacedLocal: 2, keptLocal: 0)),
        ]
    }

    func testEveryAnswerAndErrorSurvivesTheTrip() throws {
        let answers = answers()
        for (index, answer) in answers.enumerated() {
            let decoded = try WireCodec.answer(from: WireCodec.frame(.success(answer), id: UInt32(index)))
            XCTAssertEqual(decoded.id, UInt32(index))
            XCTAssertEqual(try decoded.answer.get(), answer)
        }
        let failure = try WireCodec.answer(from: WireCodec.frame(.failure(.missingEntitlement("group g")), id: 7))
        guard case .failure(let error) = failure.answer else { return XCTFail("\(failure)") }
        XCTAssertEqual(error.code, .missingEntitlement)
        XCTAssertEqual(error.reason, "group g")
    }

    func testProgressTravelsInFramesOfItsOwnThatNoAnswerIsTakenFor() throws {
        let frame = WireCodec.progressFrame(done: 4200, total: 10_000, id: 9)
        XCTAssertTrue(WireCodec.isProgress(frame))
        let told = try WireCodec.progress(from: frame)
        XCTAssertEqual(told.id, 9)
        XCTAssertEqual(told.done, 4200)
        XCTAssertEqual(told.total, 10_000)
        XCTAssertEqual(frame[5], 5, "its own frame kind")
        XCTAssertThrowsError(try WireCodec.answer(from: frame), "never an answer")
        XCTAssertThrowsError(try WireCodec.request(from: frame), "never a request")
        let answer = WireCodec.frame(.success(.done), id: 9)
        XCTAssertFalse(WireCodec.isProgress(answer))
        XCTAssertThrowsError(try WireCodec.progress(from: answer))
        // Past its total, truncated, or with bytes after it: refused.
        XCTAssertThrowsError(try WireCodec.progress(from: WireCodec.progressFrame(done: 2, total: 1, id: 9)))
        XCTAssertThrowsError(try WireCodec.progress(from: frame.dropLast()))
        var longer = frame + Data([0])
        longer[10] += 1
        XCTAssertThrowsError(try WireCodec.progress(from: longer))
    }

    func testBadFramesAreRefusedWithAReason() {
        let good = WireCodec.frame(.copyMatching(query: query), id: 3)
        func refused(_ frame: Data, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertThrowsError(try WireCodec.request(from: frame), file: file, line: line) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(error)", file: file, line: line)
            }
        }
        refused(Data(), "header is truncated")
        refused(Data("GET / HTTP/1.1\r\n\r\n".utf8), "not a keychain frame")
        var version = good
        version[4] = WireFormat.version + 1
        refused(version, "version \(WireFormat.version + 1)")
        version[4] = 1  // the protocol before authentication requests
        refused(version, "version 1")
        var kind = good
        kind[5] = 9
        refused(kind, "unknown frame kind")
        refused(good.dropLast(), "not the length")
        refused(good + Data([0]), "not the length")
        var oversized = good
        oversized.replaceSubrange(10..<14, with: [0xff, 0xff, 0xff, 0x7f])
        refused(oversized, "over the limit")
        // An answer where a request is expected.
        refused(WireCodec.frame(.success(.done), id: 1), "wrong kind")
        // A payload with bytes after the request.
        var trailing = WireCodec.frame(.lock, id: 1)
        trailing.replaceSubrange(10..<14, with: [2, 0, 0, 0])
        trailing.append(0)
        refused(trailing, "bytes follow")
        // Not UTF-8, an unknown tag, an impossible count, a repeated key, too deep.
        refused(frame(payload: [2, 1, 0, 0, 0, 1, 0, 0, 0, 0xff, 1, 0, 0, 0, 0]), "not UTF-8")
        refused(frame(payload: [99]), "unknown request 99")
        // An enclave key operation, a hash or a signature input the protocol does not know.
        refused(frame(payload: [10, 0, 0, 0, 0, 9]), "unknown enclave key operation 9")
        refused(frame(payload: [10, 0, 0, 0, 0, 1, 5, 1, 0, 0, 0, 0]), "unknown hash 5")
        refused(frame(payload: [10, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0]), "unknown signature input 3")
        refused(frame(payload: [2, 0xff, 0xff, 0xff, 0xff]), "over the limit")
        refused(
            frame(payload: [
                2, 2, 0, 0, 0, 1, 0, 0, 0, 0x61, ValueTag.null.rawValue, 1, 0, 0, 0, 0x61, ValueTag.null.rawValue,
            ]), "twice")
        refused(
            frame(payload: [
                2, 2, 0, 0, 0, 1, 0, 0, 0, 0x62, ValueTag.null.rawValue, 1, 0, 0, 0, 0x61, ValueTag.null.rawValue,
            ]), "out of order")
        var deep: [UInt8] = [2, 1, 0, 0, 0, 1, 0, 0, 0, 0x61]
        for _ in 0..<20 { deep += [ValueTag.array.rawValue, 1, 0, 0, 0] }
        deep.append(ValueTag.null.rawValue)
        refused(frame(payload: deep), "too deeply")
    }

    private func frame(payload: [UInt8], kind: FrameKind = .request) -> Data {
        var header = WireFormat.magic
        header += [WireFormat.version, kind.rawValue, 1, 0, 0, 0]
        withUnsafeBytes(of: UInt32(payload.count).littleEndian) { header.append(contentsOf: $0) }
        return header + Data(payload)
    }

    /// A bounded fuzz run: a million random and mutated frames, each refused or decoded, none trapping;
    /// and a frame that decodes is the one encoding of what it decoded to: encoding that again gives
    /// the same bytes, which decode to the same request or answer.
    func testAMillionRandomAndMutatedFrames() throws {
        var generator = SplitMix(seed: 0x5eed)
        let seeds =
            requests().map { WireCodec.frame($0, id: 1) }
            + answers().map { WireCodec.frame(.success($0), id: 2) }
            + [WireCodec.frame(.failure(.missingEntitlement("group g")), id: 3)]
        var decoded = 0
        for round in 0..<1_000_000 {
            var frame: Data
            if round % 10 == 0 {
                frame = Data((0..<Int(generator.next() % 64)).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            } else {
                frame = seeds[Int(generator.next() % UInt64(seeds.count))]
                for _ in 0..<1 + Int(generator.next() % 4) {
                    let position = Int(generator.next() % UInt64(frame.count))
                    switch generator.next() % 3 {
                    case 0: frame[position] = UInt8(truncatingIfNeeded: generator.next())
                    case 1: frame = frame.prefix(position)
                    default: frame.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
                    }
                    if frame.isEmpty { break }
                }
            }
            if let (id, request) = try? WireCodec.request(from: frame) {
                decoded += 1
                let again = WireCodec.frame(request, id: id)
                XCTAssertEqual(again, frame, "round \(round): \(request.name) re-encodes differently")
                XCTAssertTrue(same(try WireCodec.request(from: again).request, request), "round \(round)")
            }
            if let (id, answer) = try? WireCodec.answer(from: frame) {
                decoded += 1
                let again = WireCodec.frame(answer, id: id)
                XCTAssertEqual(again, frame, "round \(round): an answer re-encodes differently")
                XCTAssertEqual(try WireCodec.answer(from: again).answer, answer, "round \(round)")
            }
        }
        // Some mutations land on values and still decode: the run reached past the header.
        XCTAssertGreaterThan(decoded, 0)
    }
}

/// A small, seeded generator, so a failing run can be repeated.
struct SplitMix {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
