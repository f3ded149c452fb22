import Foundation
import KeychainBytes
import KeychainCore
import XCTest

/// The vocabulary's one encoding: the bytes it gives are the ones stored in every sealed item, so they
/// are pinned here; every value survives it; bytes from outside are refused with a reason; and what
/// decodes is the one encoding of what it decoded to.
final class ValueCodingTests: XCTestCase {
    private let values: [String: ItemValue] = [
        "null": .null, "string": .string("é✓"), "data": .data(Data([0, 255])), "integer": .integer(-2),
        "double": .double(0.5), "date": .date(Date(timeIntervalSinceReferenceDate: 1)), "bool": .bool(true),
        "array": .array([.integer(1), .array([])]),
        "accc": .accessControl(AccessControlPolicy(protection: .afterFirstUnlockThisDeviceOnly, flags: 1 << 30 | 3)),
        "context": .authenticationContext(
            AuthenticationContextReference(
                interactionNotAllowed: true, applicationPassword: SecureBytes(copying: [1, 2]),
                localizedReason: "why")),
        "reference": .valueReference(ValueReference(kind: .identity, persistentReference: Data([7]))),
        "unsupported": .unsupported("NSURL"),
        "secret": .secret(SecureBytes(copying: [5, 6, 7])),
    ]

    private func encoded(_ body: (inout ValueWriter) -> Void) -> [UInt8] {
        var writer = ValueWriter()
        body(&writer)
        return Array(writer.data)
    }

    /// Tag numbers and layouts as sealed items hold them (release 0.1.0 wrote these bytes).
    func testTheStoredEncodingIsPinned() {
        XCTAssertEqual(encoded { $0.value(.null) }, [0])
        XCTAssertEqual(encoded { $0.value(.string("ab")) }, [1, 2, 0, 0, 0, 0x61, 0x62])
        XCTAssertEqual(encoded { $0.value(.data(Data([9]))) }, [2, 1, 0, 0, 0, 9])
        XCTAssertEqual(encoded { $0.value(.integer(-1)) }, [3] + [UInt8](repeating: 0xff, count: 8))
        XCTAssertEqual(encoded { $0.value(.double(1)) }, [4, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f])
        // Dates count from 2001-01-01, as Core Foundation's do.
        XCTAssertEqual(
            encoded { $0.value(.date(Date(timeIntervalSinceReferenceDate: 1))) }, [5, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f])
        XCTAssertEqual(encoded { $0.value(.bool(true)) }, [6, 1])
        // A secret has data's layout under a tag of its own, so that it decodes into wiped memory.
        XCTAssertEqual(encoded { $0.value(.secret(SecureBytes(copying: [9]))) }, [12, 1, 0, 0, 0, 9])
        XCTAssertEqual(encoded { $0.result(.secret(SecureBytes(copying: [9]))) }, [4, 1, 0, 0, 0, 9])
        XCTAssertEqual(
            encoded { $0.accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: 2)) },
            [2, 0, 0, 0, 0x61, 0x6b, 2, 0, 0, 0, 0, 0, 0, 0])
        // Keys in order, whatever order the dictionary gives them in.
        XCTAssertEqual(
            encoded { $0.dictionary(["b": .bool(false), "a": .null]) },
            [2, 0, 0, 0, 1, 0, 0, 0, 0x61, 0, 1, 0, 0, 0, 0x62, 6, 0])
    }

    func testEveryValueSurvives() throws {
        var writer = ValueWriter()
        writer.dictionary(values)
        var reader = ValueReader(writer.data, limits: .authenticated)
        let decoded = try reader.dictionary()
        try reader.finish()
        XCTAssertEqual(decoded, values)
        guard case .authenticationContext(let context)? = decoded["context"] else { return XCTFail("no context") }
        XCTAssertTrue(context.interactionNotAllowed)
        XCTAssertEqual(context.localizedReason, "why")
        XCTAssertEqual(context.applicationPassword, SecureBytes(copying: [1, 2]))
        // Equal to data with the same bytes, as the API sees it, but still a secret.
        guard case .secret(let secret)? = decoded["secret"] else {
            return XCTFail("the secret came back as another case")
        }
        XCTAssertEqual(secret, SecureBytes(copying: [5, 6, 7]))
        XCTAssertEqual(ItemValue.secret(secret), .data(Data([5, 6, 7])))
        XCTAssertNotEqual(ItemValue.secret(secret), .data(Data([5, 6, 8])))
        // Hashing agrees: a set holds data and the secret with the same bytes as one value.
        XCTAssertEqual(Set([ItemValue.data(Data([5, 6, 7])), .secret(secret), .integer(3)]).count, 2)
    }

    func testBytesFromOutsideAreRefusedWithAReason() {
        func refused(_ bytes: [UInt8], _ expected: String, limits: DecodingLimits = .authenticated, line: UInt = #line)
        {
            var reader = ValueReader(Data(bytes), limits: limits)
            XCTAssertThrowsError(try reader.dictionary(), line: line) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(error)", line: line)
            }
        }
        refused([1, 0, 0, 0, 1, 0, 0, 0, 0x61, 99], "unknown value 99")
        refused([1, 0, 0, 0, 1, 0, 0, 0, 0xff, 0], "not UTF-8")
        refused([1, 0, 0, 0, 1, 0, 0, 0, 0x61, 6, 2], "neither 0 nor 1")
        refused([1, 0, 0, 0, 1, 0, 0, 0, 0x61, 5] + [0, 0, 0, 0, 0, 0, 0xf8, 0x7f], "not a number")
        refused([1, 0, 0, 0, 1, 0, 0, 0, 0x61, 8, 1, 0, 0, 0, 0x78] + [UInt8](repeating: 0, count: 8), "protection")
        refused([0xff, 0xff, 0xff, 0xff], "entries")
        refused([1, 0, 0, 0, 1, 0, 0, 0, 0x61], "truncated")
        refused(
            [1, 0, 0, 0, 1, 0, 0, 0, 0x61, 7, 1, 0, 0, 0, 7, 0, 0, 0, 0], "too deeply",
            limits: DecodingLimits(maximumDepth: 2, maximumEntries: 10, maximumValues: 10, input: "test"))
        refused(
            [1, 0, 0, 0, 1, 0, 0, 0, 0x61, 7, 3, 0, 0, 0, 0, 0, 0], "values",
            limits: DecodingLimits(maximumDepth: 8, maximumEntries: 10, maximumValues: 3, input: "test"))
    }

    /// Random mutations of an encoded dictionary: each is refused or decodes to a dictionary whose
    /// encoding is exactly the mutated bytes.
    func testWhatDecodesIsTheOneEncodingOfIt() throws {
        var writer = ValueWriter()
        writer.dictionary(values)
        let seed = Array(writer.data)
        var state: UInt64 = 0x00c0_ffee
        func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xbf58_476d_1ce4_e5b9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94d0_49bb_1331_11eb
            return mixed ^ (mixed >> 31)
        }
        var decoded = 0
        for _ in 0..<60_000 {
            var bytes = seed
            let position = Int(next() % UInt64(bytes.count))
            bytes[position] = UInt8(truncatingIfNeeded: next())
            var reader = ValueReader(Data(bytes), limits: .authenticated)
            guard let dictionary = try? reader.dictionary(), reader.isAtEnd else { continue }
            decoded += 1
            var again = ValueWriter()
            again.dictionary(dictionary)
            XCTAssertEqual(Array(again.data), bytes, "byte \(position) changed")
            var second = ValueReader(again.data, limits: .authenticated)
            XCTAssertEqual(try second.dictionary(), dictionary)
        }
        XCTAssertGreaterThan(decoded, 300, "mutations inside values decode")
    }
}
