import Foundation
import KeychainBytes
import XCTest

/// The bottom layer: checked hex, constant-time comparison, wiped buffers, bounded byte reading.
final class BytesTests: XCTestCase {
    func testHexRoundTripsAndRefusesWhatIsNotHex() {
        XCTAssertEqual(Hex.encode([0x00, 0x0f, 0xa5, 0xff]), "000fa5ff")
        XCTAssertEqual(Hex.decode("000fa5ff"), Data([0x00, 0x0f, 0xa5, 0xff]))
        XCTAssertEqual(Hex.decode("A5fF"), Data([0xa5, 0xff]))
        XCTAssertEqual(Hex.decode(""), Data())
        XCTAssertNil(Hex.decode("abc"), "an odd length")
        XCTAssertNil(Hex.decode("0g"), "not a digit")
        XCTAssertNil(Hex.decode("+1"), "a sign is no digit")
        XCTAssertNil(Hex.decode(" 1"), "nor a space")
        let bytes = Data((0...255).map { UInt8($0) })
        XCTAssertEqual(Hex.decode(Hex.encode(bytes)), bytes)
    }

    func testConstantTimeEqualityIsEquality() {
        XCTAssertTrue(ConstantTime.equal(Data([1, 2, 3]), Data([1, 2, 3])))
        XCTAssertFalse(ConstantTime.equal(Data([1, 2, 3]), Data([1, 2, 4])))
        XCTAssertFalse(ConstantTime.equal(Data([0, 2, 3]), Data([1, 2, 3])))
        XCTAssertFalse(ConstantTime.equal(Data([1, 2]), Data([1, 2, 3])))
        XCTAssertTrue(ConstantTime.equal(Data(), Data()))
        XCTAssertTrue(SecureBytes(copying: [7, 8]) == SecureBytes(copying: [7, 8]))
        XCTAssertFalse(SecureBytes(copying: [7, 8]) == SecureBytes(copying: [7, 9]))
    }

    func testWipingZeroesTheBuffer() {
        var bytes: [UInt8] = [1, 2, 3, 4]
        SecureMemory.wipe(&bytes)
        XCTAssertEqual(bytes, [0, 0, 0, 0])
        var writer = ByteWriter()
        writer.writeBytes(Data([9, 9]))
        XCTAssertEqual(writer.count, 6)
        writer.wipe()
        XCTAssertEqual(writer.count, 0)
    }

    func testAWriterThatGrowsAfterASecretKeepsEveryByteInOrder() throws {
        // Written small so that the buffer grows (by hand, wiping the old one) several times after the secret.
        var writer = ByteWriter(capacity: 4)
        writer.write(UInt8(7))
        let secret = [UInt8](repeating: 0xA5, count: 40)
        secret.withUnsafeBytes { writer.writeSecretBytes($0) }
        for index in 0..<300 { writer.write(UInt32(index)) }
        writer.writeBytes(Data("end".utf8))
        var reader = ByteReader(writer.data)
        XCTAssertEqual(try reader.read() as UInt8, 7)
        XCTAssertEqual(try reader.readBytes(), Data(secret))
        for index in 0..<300 { XCTAssertEqual(try reader.read() as UInt32, UInt32(index)) }
        XCTAssertEqual(try reader.readBytes(), Data("end".utf8))
        XCTAssertTrue(reader.isAtEnd)
    }

    func testTheReaderRefusesWhatIsNotThere() throws {
        var writer = ByteWriter()
        writer.write(UInt32(7))
        writer.writeString("ok")
        var reader = ByteReader(writer.data)
        XCTAssertEqual(try reader.read() as UInt32, 7)
        XCTAssertEqual(try reader.readValidString(), "ok")
        XCTAssertTrue(reader.isAtEnd)
        XCTAssertThrowsError(try reader.read() as UInt8)
        var lying = ByteReader(Data([0xff, 0xff, 0xff, 0x7f, 1]))
        XCTAssertThrowsError(try lying.readBytes(), "a length beyond the input")
    }

    func testTheBootClockIsMonotonicAndNamesItsBoot() {
        let clock = SystemClock()
        let first = clock.sinceBoot()
        let second = clock.sinceBoot()
        XCTAssertEqual(first.boot, second.boot)
        XCTAssertEqual(first.boot.count, 16)
        XCTAssertNotEqual(first.boot, Data(count: 16), "the kernel gives a boot id")
        XCTAssertGreaterThanOrEqual(second.nanoseconds, first.nanoseconds)
    }
}
