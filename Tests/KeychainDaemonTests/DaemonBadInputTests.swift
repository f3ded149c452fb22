import Foundation
import KeychainCore
import KeychainTestSupport
import KeychainWire
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Bytes no client sends, and clients no daemon should serve: each gets an error or a closed
/// connection, a line in the log saying why, and everyone else goes on being served.
final class DaemonBadInputTests: XCTestCase {
    var daemon: TestDaemon!

    override func setUpWithError() throws {
        daemon = try TestDaemon(arguments: ["--stall-timeout-ms", "300"])
    }

    override func tearDown() { daemon = nil }

    /// The daemon still runs and answers a well-formed request.
    private func assertStillServing(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(daemon.process.isRunning, daemon.log, file: file, line: line)
        XCTAssertNoThrow(try daemon.service().status(), daemon.log, file: file, line: line)
    }

    /// Sends `bytes`, then reads until the daemon closes the connection; returns what it sent back.
    private func exchange(_ bytes: Data, thenClose: Bool = false) throws -> Data? {
        let connection = try RawConnection(daemon.socket)
        connection.send(bytes)
        if thenClose { shutdown(connection.descriptor, Int32(SHUT_WR)) }
        return connection.readUntilClosed()
    }

    private func header(kind: UInt8 = 1, version: UInt8 = WireFormat.version, id: UInt32 = 1, length: UInt32) -> Data {
        var bytes = WireFormat.magic
        bytes.append(version)
        bytes.append(kind)
        withUnsafeBytes(of: id.littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: length.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// A failure frame's error code, if `answer` is one.
    private func failureCode(_ answer: Data?) -> KeychainError.Code? {
        guard let answer, case .failure(let error)? = try? WireCodec.answer(from: answer).answer else { return nil }
        return error.code
    }

    func testGarbageIsAnsweredWithAnErrorAndTheConnectionClosed() throws {
        let answer = try exchange(Data("GET / HTTP/1.1\r\nHost: keychain\r\n\r\n".utf8))
        XCTAssertEqual(failureCode(answer), .invalidParameter)
        XCTAssertTrue(daemon.log.contains("not a keychain frame"), daemon.log)
        assertStillServing()
    }

    func testOversizedWrongVersionAndOutOfOrderFramesAreRefused() throws {
        // A length over the limit: refused from the header, before any payload is read or allocated.
        XCTAssertEqual(
            failureCode(try exchange(header(length: UInt32(WireFormat.maximumPayload + 1)))), .invalidParameter)
        XCTAssertTrue(daemon.log.contains("over the limit"), daemon.log)
        XCTAssertEqual(failureCode(try exchange(header(version: 9, length: 0))), .invalidParameter)
        XCTAssertTrue(daemon.log.contains("protocol version 9"), daemon.log)
        // An answer sent to the daemon, and a request whose payload is not a request.
        let answer = WireCodec.frame(.success(.done), id: 7)
        XCTAssertEqual(failureCode(try exchange(answer)), .invalidParameter)
        XCTAssertEqual(failureCode(try exchange(header(length: 1) + Data([0xee]))), .invalidParameter)
        XCTAssertTrue(daemon.log.contains("unknown request 238"), daemon.log)
        // A request followed by trailing bytes within its payload.
        var status = WireCodec.frame(.status, id: 3)
        status[10] = 2
        status.append(0)
        XCTAssertEqual(failureCode(try exchange(status)), .invalidParameter)
        assertStillServing()
    }

    func testAProcessThatIsNoAppCannotMakeTheDaemonHoldLargeOrExplodingFrames() throws {
        // This test process is not registered: its frames are held to 1 MiB, refused from the header.
        XCTAssertEqual(failureCode(try exchange(header(length: 2 << 20))), .invalidParameter)
        XCTAssertTrue(daemon.log.contains("over this connection's limit of 1048576"), daemon.log)
        // A small frame that would decode into very many values.
        var payload = Data([2])  // copyMatching
        payload += Data([1, 0, 0, 0])  // one entry
        payload += Data([1, 0, 0, 0]) + Data("k".utf8)
        payload += Data([7]) + withUnsafeBytes(of: UInt32(4096).littleEndian) { Data($0) }
        for _ in 0..<4096 {
            payload +=
                Data([7]) + withUnsafeBytes(of: UInt32(20).littleEndian) { Data($0) }
                + Data(repeating: ValueTag.null.rawValue, count: 20)
        }
        XCTAssertEqual(failureCode(try exchange(header(length: UInt32(payload.count)) + payload)), .invalidParameter)
        XCTAssertTrue(daemon.log.contains("more than \(WireFormat.maximumValues) values in one frame"), daemon.log)
        assertStillServing()
    }

    func testOneUserCannotTakeEveryConnection() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let system = try TestDaemon(arguments: ["--system"])
        // 128 connections of one uid (an eighth of 1,024) are held; the next is closed at once.
        let held = try (0..<128).map { _ in try RawConnection(system.socket) }
        let deadline = Date().addingTimeInterval(5)
        while !system.log.contains("connection limit reached"), Date() < deadline {
            _ = try RawConnection(system.socket).readUntilClosed(timeout: 0.2)
        }
        XCTAssertTrue(system.log.contains("connection limit reached (uid 0: 128 at most"), system.log)
        // Another user is still served.
        let other = try ClientPrograms.run(
            ClientPrograms.built("security"), ["show-keychain-info"], daemon: system, user: 65534)
        XCTAssertEqual(other.status, 0, other.output)
        XCTAssertEqual(held.count, 128)
    }

    func testATruncatedFrameChangesNothing() throws {
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        // An add whose frame stops halfway, from a client that then goes away.
        let add = WireCodec.frame(
            .add(attributes: [
                "class": .string("genp"), "svce": .string("half"), "acct": .string("a"),
                "v_Data": .data(Data("x".utf8)),
            ]), id: 1)
        XCTAssertEqual(try exchange(add.prefix(add.count / 2), thenClose: true), Data())
        XCTAssertEqual(try ClientPrograms.run(app, ["count", "half"], daemon: daemon).output, "count 0")
        assertStillServing()
    }

    func testAClientThatStallsMidFrameHoldsUpNoOneAndIsDropped() throws {
        // A stall timeout far longer than twenty requests take even on a loaded machine, so that
        // the test can tell "served while the staller waits" from "served once it was dropped"
        // by the order of events rather than by a clock.
        daemon = try TestDaemon(arguments: ["--stall-timeout-ms", "2000"])
        let stalled = try RawConnection(daemon.socket)
        stalled.send(header(length: 100) + Data(repeating: 1, count: 10))
        for _ in 0..<20 { XCTAssertNoThrow(try daemon.service().status()) }
        // Everyone else was served while the staller was still connected.
        XCTAssertFalse(daemon.log.contains("timed out"), daemon.log)
        // And the staller is dropped after the stall timeout.
        XCTAssertEqual(stalled.readUntilClosed(timeout: 10), Data())
        XCTAssertTrue(daemon.log.contains("timed out"), daemon.log)
        assertStillServing()
    }

    func testThousandsOfConnectionsOpenedAndDropped() throws {
        for round in 0..<3000 {
            let connection = try RawConnection(daemon.socket)
            if round % 3 == 0 { connection.send(header(length: 40)) }  // some leave in the middle of a frame
        }
        // The daemon notices a dropped connection when its thread next reads it; until it has noticed
        // enough of them, a new connection meets the per-uid limit (and is told so). It must serve
        // again once it has, which on a loaded machine can take a moment.
        let deadline = Date().addingTimeInterval(10)
        while (try? daemon.service().status()) == nil, Date() < deadline { usleep(50_000) }
        assertStillServing()
        XCTAssertTrue(daemon.process.isRunning)
    }

    func testAClientOfAnotherUserIsRefused() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        // Let the other user reach the socket at all, so that the daemon's own check is what refuses.
        chmod((daemon.socket as NSString).deletingLastPathComponent, 0o755)
        chmod(daemon.socket, 0o666)
        let result = try ClientPrograms.run(
            ClientPrograms.built("security"), ["show-keychain-info"], daemon: daemon, user: 65534)
        XCTAssertEqual(result.status, 53, result.output)  // errSecNotAvailable
        XCTAssertTrue(daemon.log.contains("uid 65534 refused: this daemon serves uid 0 only"), daemon.log)
        assertStillServing()
    }

    func testARegistryEditedByHandIsRefusedAsAWhole() throws {
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        XCTAssertEqual(try ClientPrograms.run(app, ["put", "web", "a", "v"], daemon: daemon).output, "status 0")
        // Someone gives the app another group by editing the file.
        let path = daemon.home + "/apps.registry"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try text.replacingOccurrences(of: "\"TEAM.a\"\n", with: "\"TEAM.other\"\n").write(
            toFile: path, atomically: false, encoding: .utf8)
        XCTAssertNotEqual(try String(contentsOfFile: path, encoding: .utf8), text)
        usleep(600_000)  // the daemon looks at the file again within half a second
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "a"], daemon: daemon).output, "status -34018")
        XCTAssertTrue(daemon.log.contains("fails its integrity check"), daemon.log)
        let list = try ClientPrograms.run(ClientPrograms.built("security"), ["app", "list"], daemon: daemon)
        XCTAssertNotEqual(list.status, 0)
        XCTAssertTrue(list.output.contains("integrity check"), list.output)
        // A registry that is not even a document.
        try Data([0xff, 0x00, 0x0a]).write(to: URL(fileURLWithPath: path))
        usleep(600_000)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "a"], daemon: daemon).output, "status -34018")
        assertStillServing()
        // Removing it starts over: the app registers again and its items are there.
        try FileManager.default.removeItem(atPath: path)
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "a"], daemon: daemon).output, "v")
    }
}
