import Foundation
import KeychainDBus
import KeychainTestSupport
import Synchronization
import XCTest

/// D-Bus through sd-bus, on a private bus: every value type arrives as it was sent, calls are
/// answered with replies or errors, what sd-bus refuses is refused before anything is sent, and a
/// sender's serials order what it sends.
final class DBusConnectionTests: XCTestCase {
    private static let values: [DBusValue] = [
        .string("org.freedesktop.login1.Session"),
        .array(
            element: "{sv}",
            [
                .dictEntry(key: .string("LockedHint"), value: .variant(.boolean(true))),
                .dictEntry(key: .string("User"), value: .variant(.structure([.uint32(1000), .objectPath("/u")]))),
                .dictEntry(key: .string("Id"), value: .variant(.string("2"))),
            ]),
        .array(element: "s", []),
        .byte(7), .boolean(false), .int16(-2), .uint16(65_000), .int32(-70_000), .uint32(4_000_000_000),
        .uint64(1 << 40), .int64(-(1 << 40)), .double(2.5), .signature("a{sv}"),
        .array(element: "ay", [.bytes(Data([1, 0])), .bytes(Data())]),
        .string("ünïcödé ✓"),
    ]

    func testEveryTypeArrivesAsItWasSent() throws {
        let bus = try TestBus()
        let sender = try DBusConnection(address: bus.address)
        let listener = try DBusConnection(address: bus.address)
        XCTAssertTrue(sender.uniqueName.hasPrefix(":"), sender.uniqueName)
        XCTAssertNotEqual(sender.uniqueName, listener.uniqueName)
        try listener.addMatch("type='signal',interface='test.Values'")
        let first = try sender.send(.signal(path: "/test", interface: "test.Values", member: "All", body: Self.values))
        let second = try sender.send(.signal(path: "/test", interface: "test.Values", member: "Again"))
        XCTAssertGreaterThan(second, first)
        let received = try XCTUnwrap(try next(on: listener) { $0.member == "All" })
        XCTAssertEqual(received.kind, .signal)
        XCTAssertEqual(received.sender, sender.uniqueName)
        XCTAssertEqual(received.path, "/test")
        XCTAssertEqual(received.interface, "test.Values")
        XCTAssertEqual(received.serial, first)
        XCTAssertEqual(received.body, Self.values)
        XCTAssertEqual(received.signature, Self.values.map(\.signature).joined())
        XCTAssertEqual(received.body[1].stringDictionary?["LockedHint"], .variant(.boolean(true)))
        let again = try XCTUnwrap(try next(on: listener) { $0.member == "Again" })
        XCTAssertGreaterThan(again.serial, received.serial, "a sender numbers what it sends in order")
    }

    func testACallIsAnsweredWithItsReplyOrItsError() throws {
        let bus = try TestBus()
        let server = try DBusConnection(address: bus.address)
        XCTAssertTrue(try server.requestName("test.Server"))
        let client = try DBusConnection(address: bus.address)
        XCTAssertEqual(try client.nameOwner("test.Server"), server.uniqueName)
        XCTAssertNil(try client.nameOwner("test.Nobody"))
        XCTAssertFalse(try client.requestName("test.Server"), "owned by another connection")

        let stopping = Atomic<Bool>(false)
        let served = Thread {
            while !stopping.load(ordering: .acquiring) {
                guard let call = try? server.receive(timeout: .milliseconds(50)), call.kind == .methodCall else {
                    continue
                }
                switch call.member {
                case "Echo": _ = try? server.send(.reply(to: call, body: call.body))
                case "Fail": _ = try? server.send(.error(to: call, name: "test.Error.Refused", message: "refused"))
                default: break  // "Ignore": never answered
                }
            }
        }
        served.start()
        defer { stopping.store(true, ordering: .releasing) }

        let echo = try client.call(
            .call(destination: "test.Server", path: "/s", interface: "test.Server", member: "Echo", body: Self.values))
        XCTAssertEqual(echo.kind, .methodReturn)
        XCTAssertEqual(echo.body, Self.values)
        XCTAssertEqual(echo.sender, server.uniqueName)
        XCTAssertThrowsError(
            try client.call(.call(destination: "test.Server", path: "/s", interface: "test.Server", member: "Fail"))
        ) { error in
            XCTAssertEqual((error as? DBusError)?.code, .errorReply)
            XCTAssertEqual((error as? DBusError)?.reason, "test.Error.Refused: refused")
        }
        XCTAssertThrowsError(
            try client.call(.call(destination: "test.Nobody", path: "/s", interface: "test.Server", member: "Echo"))
        ) { error in
            XCTAssertEqual((error as? DBusError)?.code, .errorReply)
            XCTAssertTrue((error as? DBusError)?.reason.contains("ServiceUnknown") == true, "\(error)")
        }
        XCTAssertThrowsError(
            try client.call(
                .call(destination: "test.Server", path: "/s", interface: "test.Server", member: "Ignore"),
                timeout: .milliseconds(300))
        ) { error in
            XCTAssertEqual((error as? DBusError)?.code, .timedOut)
        }
        // The connection goes on after all of that.
        XCTAssertEqual(
            try client.call(
                .call(
                    destination: "test.Server", path: "/s", interface: "test.Server", member: "Echo", body: [.byte(1)])
            ).body, [.byte(1)])
    }

    func testWhatTheSpecificationForbidsIsRefusedBeforeItIsSent() throws {
        let bus = try TestBus()
        let connection = try DBusConnection(address: bus.address)
        let listener = try DBusConnection(address: bus.address)
        try listener.addMatch("type='signal',interface='test.Bad'")
        let refused: [(String, DBusMessage)] = [
            ("a relative path", .signal(path: "not/a/path", interface: "test.Bad", member: "M")),
            ("a bad member", .signal(path: "/p", interface: "test.Bad", member: "no spaces allowed")),
            (
                "a bad element signature",
                .signal(path: "/p", interface: "test.Bad", member: "M", body: [.array(element: "{", [])])
            ),
            (
                "an object path that is not one",
                .signal(path: "/p", interface: "test.Bad", member: "M", body: [.objectPath("x")])
            ),
            (
                "a descriptor",
                .signal(
                    path: "/p", interface: "test.Bad", member: "M",
                    body: [.unixFD(try XCTUnwrap(DBusDescriptor(duplicating: 0)))])
            ),
            ("a reply to nothing received", .reply(to: .signal(path: "/p", interface: "test.Bad", member: "M"))),
        ]
        for (name, message) in refused {
            XCTAssertThrowsError(try connection.send(message), name) { error in
                XCTAssertEqual((error as? DBusError)?.code, .malformed, name)
            }
        }
        XCTAssertNil(
            try next(on: listener, within: .milliseconds(300)) { $0.interface == "test.Bad" }, "nothing was sent")
    }

    func testAnAddressWithoutABusIsRefused() throws {
        XCTAssertThrowsError(try DBusConnection(address: "unix:path=/nonexistent/bus")) { error in
            XCTAssertEqual((error as? DBusError)?.code, .connection)
        }
        XCTAssertThrowsError(try DBusConnection(address: "not-an-address")) { error in
            XCTAssertEqual((error as? DBusError)?.code, .connection)
        }
    }

    /// The first message `wanted` accepts, skipping the bus's own (NameAcquired and the like).
    func testAMessageOfTooManyValuesIsRefusedAndTheNextOneRead() throws {
        let bus = try TestBus()
        let sender = try DBusConnection(address: bus.address)
        let listener = try DBusConnection(address: bus.address)
        try listener.addMatch("type='signal',interface='test.Flood'")
        let flood = DBusValue.array(element: "u", (0..<(DBusMessage.maximumValues + 1)).map { .uint32(UInt32($0)) })
        try sender.send(.signal(path: "/test", interface: "test.Flood", member: "Many", body: [flood]))
        try sender.send(.signal(path: "/test", interface: "test.Flood", member: "After"))
        var refused = false
        var after: DBusMessage?
        let deadline = ContinuousClock.now + .seconds(10)
        while after == nil, ContinuousClock.now < deadline {
            do {
                if let message = try listener.receive(timeout: .milliseconds(100)), message.member == "After" {
                    after = message
                }
            } catch {
                XCTAssertEqual(error.code, .malformed)
                XCTAssertTrue(error.reason.contains("more than \(DBusMessage.maximumValues) values"), error.reason)
                refused = true
            }
        }
        XCTAssertTrue(refused)
        XCTAssertNotNil(after, "the next message is read")
        // Bytes count once: a large byte array is within the bound.
        try sender.send(
            .signal(path: "/test", interface: "test.Flood", member: "Bytes", body: [.bytes(Data(count: 1 << 20))]))
        XCTAssertEqual(try next(on: listener) { $0.member == "Bytes" }?.body, [.bytes(Data(count: 1 << 20))])
    }

    func testOnlyUnixSocketAddressesAreUsed() {
        XCTAssertThrowsError(try DBusConnection(address: "tcp:host=127.0.0.1,port=5555")) { error in
            XCTAssertEqual((error as? DBusError)?.code, .connection)
            XCTAssertTrue("\(error)".contains("only unix:"), "\(error)")
        }
        XCTAssertThrowsError(try DBusConnection(address: "unix:path=/nonexistent/bus;tcp:host=localhost,port=1"))
    }

    private func next(
        on connection: DBusConnection, within wait: Duration = .seconds(5), _ wanted: (DBusMessage) -> Bool
    ) throws -> DBusMessage? {
        let deadline = ContinuousClock.now + wait
        while ContinuousClock.now < deadline {
            if let message = try connection.receive(timeout: .milliseconds(100)), wanted(message) { return message }
        }
        return nil
    }
}
