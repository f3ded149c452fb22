import KeychainDBus
import XCTest

/// The D-Bus wire format: what is encoded decodes to the same message, byte for byte where the
/// specification fixes the bytes, and no input makes the decoder crash or read out of bounds.
final class DBusMessageTests: XCTestCase {
    func testEveryTypeRoundTrips() throws {
        var message = DBusMessage.signal(
            path: "/org/freedesktop/login1/session/_32", interface: "org.freedesktop.DBus.Properties",
            member: "PropertiesChanged",
            body: [
                .string("org.freedesktop.login1.Session"),
                .array(
                    element: "{sv}",
                    [
                        .dictEntry(key: .string("LockedHint"), value: .variant(.boolean(true))),
                        .dictEntry(
                            key: .string("User"), value: .variant(.structure([.uint32(1000), .objectPath("/u")]))),
                        .dictEntry(key: .string("Id"), value: .variant(.string("2"))),
                    ]),
                .array(element: "s", []),
                .byte(7), .int16(-2), .uint16(65_000), .int32(-70_000), .uint64(1 << 40), .int64(-(1 << 40)),
                .double(2.5), .signature("a{sv}"), .array(element: "ay", [.array(element: "y", [.byte(1)])]),
            ])
        message.sender = ":1.7"
        let bytes = message.encoded(serial: 42)
        XCTAssertEqual(bytes.count % 1, 0)
        XCTAssertEqual(try DBusMessage.length(ofMessageStartingWith: bytes[...]), bytes.count)
        var decoded = try DBusMessage(decoding: bytes)
        XCTAssertEqual(decoded.serial, 42)
        decoded.serial = 0
        XCTAssertEqual(decoded, message)
        XCTAssertEqual(decoded.body[1].stringDictionary?["LockedHint"], .variant(.boolean(true)))
    }

    func testAHeaderIsLaidOutAsTheSpecificationSays() {
        // A call with no body: 'l', kind 1, no flags, version 1, body length 0, serial 1, then the
        // header fields, padded to 8.
        let bytes = DBusMessage.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "Hello"
        ).encoded(serial: 1)
        XCTAssertEqual(Array(bytes[0..<12]), [0x6c, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0])
        XCTAssertEqual(bytes.count % 8, 0)
        // The first field: code 1 (path), variant of signature "o", the path's length and bytes.
        XCTAssertEqual(Array(bytes[16..<24]), [1, 1, 0x6f, 0, 21, 0, 0, 0])
        XCTAssertEqual(String(decoding: bytes[24..<45], as: UTF8.self), "/org/freedesktop/DBus")
    }

    func testABigEndianMessageDecodes() throws {
        // Built by hand: a signal with one uint32 (0x01020304) in big-endian order.
        var bytes: [UInt8] = [0x42, 4, 0, 1, 0, 0, 0, 4, 0, 0, 0, 9]
        var fields: [UInt8] = []
        func pad() { while (12 + 4 + fields.count) % 8 != 0 { fields.append(0) } }
        // path "/a"
        fields += [1, 1, 0x6f, 0, 0, 0, 0, 2] + Array("/a".utf8) + [0]
        pad()
        // interface "x.y"
        fields += [2, 1, 0x73, 0, 0, 0, 0, 3] + Array("x.y".utf8) + [0]
        pad()
        // member "M"
        fields += [3, 1, 0x73, 0, 0, 0, 0, 1] + Array("M".utf8) + [0]
        pad()
        // signature "u"
        fields += [8, 1, 0x67, 0, 1, 0x75, 0]
        let length = UInt32(fields.count)
        bytes += [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
        bytes += fields
        while bytes.count % 8 != 0 { bytes.append(0) }
        bytes += [1, 2, 3, 4]
        let message = try DBusMessage(decoding: bytes)
        XCTAssertEqual(message.kind, .signal)
        XCTAssertEqual(message.path, "/a")
        XCTAssertEqual(message.member, "M")
        XCTAssertEqual(message.serial, 9)
        XCTAssertEqual(message.body, [.uint32(0x0102_0304)])
    }

    func testMalformedMessagesAreRefusedWithTheirReason() {
        let good = DBusMessage.signal(
            path: "/p", interface: "a.b", member: "C", body: [.string("text"), .boolean(true)]
        )
        .encoded(serial: 3)
        var cases: [(String, [UInt8])] = [
            ("short", Array(good.prefix(10))),
            ("truncated", Array(good.dropLast())),
            ("trailing byte", good + [0]),
        ]
        var badOrder = good
        badOrder[0] = UInt8(ascii: "x")
        cases.append(("byte order", badOrder))
        var badKind = good
        badKind[1] = 9
        cases.append(("kind", badKind))
        var badBoolean = good
        badBoolean[badBoolean.count - 4] = 2
        cases.append(("boolean 2", badBoolean))
        var huge = good
        huge[4...7] = [0xff, 0xff, 0xff, 0x7f]
        cases.append(("body over the limit", huge))
        for (name, bytes) in cases {
            XCTAssertThrowsError(try DBusMessage(decoding: bytes), name) { error in
                XCTAssertEqual((error as? DBusError)?.code, .malformed, name)
            }
        }
    }

    func testTheDecoderSurvivesAHundredThousandMutatedMessages() {
        let seeds = [
            DBusMessage.signal(
                path: "/org/freedesktop/login1/session/_32", interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                body: [
                    .string("org.freedesktop.login1.Session"),
                    .array(element: "{sv}", [.dictEntry(key: .string("LockedHint"), value: .variant(.boolean(true)))]),
                    .array(element: "s", [.string("Active")]),
                ]
            ).encoded(serial: 5),
            DBusMessage.reply(
                to: DBusMessage.call(destination: "d.e", path: "/", interface: "i.j", member: "Get"),
                body: [.variant(.structure([.uint32(1000), .objectPath("/org/freedesktop/login1/user/_1000")]))]
            ).encoded(serial: 6),
        ]
        var generator = SystemRandomNumberGenerator()
        var decoded = 0
        for round in 0..<100_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: bytes[index] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes[index] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
                case 2: bytes.removeSubrange(index..<min(bytes.count, index + Int.random(in: 1...8, using: &generator)))
                default: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                }
                if bytes.isEmpty { bytes = [0] }
            }
            if (try? DBusMessage(decoding: bytes)) != nil { decoded += 1 }
        }
        // Some mutations leave a valid message (a changed letter in a string); most do not.
        XCTAssertLessThan(decoded, 100_000)
    }
}
