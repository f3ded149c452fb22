import Foundation
import KeychainBytes
import KeychainCrypto
import XCTest

/// The DER and r ‖ s forms of ECDSA signatures: canonical DER round-trips, and every other encoding of
/// the same numbers is refused, so that no signature can be rewritten into a second valid one.
final class ECDSASignatureEncodingTests: XCTestCase {
    /// DER written out here, not with the code under test: short or one-byte long lengths.
    private func element(_ tag: UInt8, _ content: Data) -> Data {
        let count = content.count
        return Data([tag] + (count < 0x80 ? [UInt8(count)] : [0x81, UInt8(count)])) + content
    }

    private func integer(_ content: Data) -> Data { element(0x02, content) }
    private func sequence(_ parts: Data...) -> Data { element(0x30, parts.reduce(Data(), +)) }

    func testCanonicalSignaturesRoundTrip() throws {
        // r with its top bit clear, s with it set (so DER gives s a sign byte), on P-256.
        let r = Data([0x7f] + [UInt8](repeating: 0x01, count: 31))
        let s = Data([0x80] + [UInt8](repeating: 0x02, count: 31))
        let der = sequence(integer(r), integer(Data([0]) + s))
        XCTAssertEqual(ECDSASignatureEncoding.rawRS(fromDER: der, coordinateSize: 32), r + s)
        XCTAssertEqual(ECDSASignatureEncoding.der(fromRawRS: r + s, coordinateSize: 32), der)
        // Short numbers: DER drops their leading zeros, r ‖ s puts them back.
        let small = sequence(integer(Data([0x01])), integer(Data([0x00])))
        let raw = Data(count: 31) + Data([1]) + Data(count: 32)
        XCTAssertEqual(ECDSASignatureEncoding.rawRS(fromDER: small, coordinateSize: 32), raw)
        XCTAssertEqual(ECDSASignatureEncoding.der(fromRawRS: raw, coordinateSize: 32), small)
        // P-521: the sequence is longer than 127 bytes, so its length takes the long form.
        let coordinate = Data([0x01] + [UInt8](repeating: 0xff, count: 65))
        let long = sequence(integer(coordinate), integer(coordinate))
        XCTAssertEqual(Array(long.prefix(2)), [0x30, 0x81])
        XCTAssertEqual(ECDSASignatureEncoding.rawRS(fromDER: long, coordinateSize: 66), coordinate + coordinate)
        XCTAssertEqual(ECDSASignatureEncoding.der(fromRawRS: coordinate + coordinate, coordinateSize: 66), long)
    }

    func testRandomSignaturesRoundTrip() throws {
        for size in [32, 48, 66] {
            for _ in 0..<50 {
                var raw = try SecureBytes(randomCount: 2 * size).withUnsafeBytes { Data($0) }
                if Bool.random() { raw[0] = 0 }
                let der = try XCTUnwrap(ECDSASignatureEncoding.der(fromRawRS: raw, coordinateSize: size))
                XCTAssertEqual(ECDSASignatureEncoding.rawRS(fromDER: der, coordinateSize: size), raw)
            }
        }
    }

    func testNonCanonicalEncodingsAreRefused() {
        let r = Data([0x7f] + [UInt8](repeating: 0x01, count: 31))
        let s = Data([0x80] + [UInt8](repeating: 0x02, count: 31))
        let canonical = sequence(integer(r), integer(Data([0]) + s))
        let refused: [(String, Data)] = [
            (
                "an integer with a leading zero it does not need",
                sequence(integer(Data([0]) + r), integer(Data([0]) + s))
            ),
            ("a zero padded twice", sequence(integer(Data([0, 0, 1])), integer(Data([1])))),
            ("a negative integer", sequence(integer(r), integer(s))),
            ("an empty integer", sequence(integer(Data()), integer(Data([1])))),
            (
                "a sequence length in long form where the short one fits",
                Data([0x30, 0x81, UInt8(canonical.count - 2)]) + canonical.dropFirst(2)
            ),
            (
                "an integer length in long form where the short one fits",
                sequence(Data([0x02, 0x81, 0x20]) + r, integer(Data([0]) + s))
            ),
            ("a byte after the sequence", canonical + Data([0])),
            ("a truncated sequence", canonical.dropLast()),
            ("an indefinite length", Data([0x30, 0x80]) + integer(Data([1])) + integer(Data([1])) + Data([0, 0])),
            ("a set instead of a sequence", Data([0x31]) + canonical.dropFirst()),
            ("three integers", sequence(integer(Data([1])), integer(Data([1])), integer(Data([1])))),
            ("one integer", sequence(integer(Data([1])))),
            (
                "an integer longer than a coordinate",
                sequence(integer(Data(repeating: 1, count: 33)), integer(Data([1])))
            ),
            ("nothing", Data()),
            ("an empty sequence", Data([0x30, 0x00])),
        ]
        for (what, der) in refused {
            XCTAssertNil(ECDSASignatureEncoding.rawRS(fromDER: der, coordinateSize: 32), what)
        }
        XCTAssertNotNil(ECDSASignatureEncoding.rawRS(fromDER: canonical, coordinateSize: 32))
    }

    func testRawSignaturesOfTheWrongLengthAreRefused() {
        XCTAssertNil(ECDSASignatureEncoding.der(fromRawRS: Data(count: 63), coordinateSize: 32))
        XCTAssertNil(ECDSASignatureEncoding.der(fromRawRS: Data(count: 65), coordinateSize: 32))
        XCTAssertNil(ECDSASignatureEncoding.der(fromRawRS: Data(), coordinateSize: 0))
        XCTAssertNil(ECDSASignatureEncoding.rawRS(fromDER: Data([0x30, 0x00]), coordinateSize: -1))
    }

    /// OpenSSL's own DER signatures read as r ‖ s, which verifies and turns back into the same DER.
    func testSignaturesOfOpenSSLKeys() throws {
        let digest = try Digest.sha256(Data("message".utf8))
        for curve in AsymmetricKey.Curve.allCases {
            let key = try AsymmetricKey.generate(.ec(curve))
            for _ in 0..<10 {
                let der = try key.sign(digest, .ecdsaDigest)
                let raw = try XCTUnwrap(
                    ECDSASignatureEncoding.rawRS(fromDER: der, coordinateSize: curve.coordinateSize), "\(curve)")
                XCTAssertEqual(ECDSASignatureEncoding.der(fromRawRS: raw, coordinateSize: curve.coordinateSize), der)
                XCTAssertTrue(try key.verify(raw, of: digest, .ecdsaRawRS), "\(curve)")
            }
        }
    }
}
