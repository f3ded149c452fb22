import Foundation
import KeychainBytes
import KeychainCrypto
import XCTest

/// AES-GCM against the test cases of the GCM specification (McGrew and Viega, "The Galois/Counter
/// Mode of Operation", appendix B): 96-bit IVs, which sealed boxes use, and a 64-bit one, which needs
/// the IV length set before the key.
final class AESGCMKnownAnswerTests: XCTestCase {
    private let plaintext = Data(
        hex: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525"
            + "b16aedf5aa0de657ba637b39")
    private let aad = Data(hex: "feedfacedeadbeeffeedfacedeadbeefabaddad2")
    private let key128 = Data(hex: "feffe9928665731c6d6a8f9467308308")
    private var key256: Data { key128 + key128 }

    private struct Case {
        let name: String
        let key: Data
        let iv: Data
        let ciphertext: String
        let tag: String
    }

    private var cases: [Case] {
        [
            Case(
                name: "test case 4", key: key128, iv: Data(hex: "cafebabefacedbaddecaf888"),
                ciphertext: "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5a"
                    + "ac84aa051ba30b396a0aac973d58e091",
                tag: "5bc94fbc3221a5db94fae95ae7121a47"),
            Case(
                name: "test case 5", key: key128, iv: Data(hex: "cafebabefacedbad"),
                ciphertext: "61353b4c2806934a777ff51fa22a4755699b2a714fcdc6f83766e5f97b6c742373806900e49f24b22b097544"
                    + "d4896b424989b5e1ebac0f07c23f4598",
                tag: "3612d2e79e3b0785561be14aaca2fccb"),
            Case(
                name: "test case 16", key: key256, iv: Data(hex: "cafebabefacedbaddecaf888"),
                ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b10"
                    + "56828838c5f61e6393ba7a0abcc9f662",
                tag: "76fc6ece0f4e1768cddf8853bb2d551b"),
        ]
    }

    func testDetachedSealAndOpenMatchTheSpecification() throws {
        for test in cases {
            let key = SecureBytes(copying: test.key)
            let (ciphertext, tag) = try AESGCM.sealDetached(plaintext, key: key, iv: test.iv, aad: aad)
            XCTAssertEqual(ciphertext.hex, test.ciphertext, test.name)
            XCTAssertEqual(tag.hex, test.tag, test.name)
            let opened = try AESGCM.openDetached(
                Data(hex: test.ciphertext), tag: Data(hex: test.tag), key: key, iv: test.iv, aad: aad)
            XCTAssertEqual(opened.withUnsafeBytes { Data($0) }, plaintext, test.name)
            var flipped = Data(hex: test.tag)
            flipped[0] ^= 1
            XCTAssertThrowsError(
                try AESGCM.openDetached(Data(hex: test.ciphertext), tag: flipped, key: key, iv: test.iv, aad: aad)
            ) { XCTAssertEqual($0 as? CryptoError, .authenticationFailed, test.name) }
        }
    }

    /// A sealed box is nonce ‖ ciphertext ‖ tag, so a specification vector with a 96-bit IV and a
    /// 256-bit key is one.
    func testASealedBoxOfTheSpecificationOpens() throws {
        let test = cases[2]
        let box = test.iv + Data(hex: test.ciphertext) + Data(hex: test.tag)
        let key = SecureBytes(copying: test.key)
        XCTAssertEqual(try AESGCM.open(box, key: key, authenticating: aad), plaintext)
        XCTAssertEqual(
            try AESGCM.openSecure(box, key: key, authenticating: aad).withUnsafeBytes { Data($0) }, plaintext)
    }

    func testDetachedRefusals() throws {
        let key = try SecureBytes(randomCount: 16)
        XCTAssertThrowsError(try AESGCM.sealDetached(Data(), key: SecureBytes(copying: [1, 2]), iv: Data(count: 12))) {
            XCTAssertEqual($0 as? CryptoError, .invalidKeySize(expected: 32, actual: 2))
        }
        for iv in [Data(), Data(count: 65)] {
            XCTAssertThrowsError(try AESGCM.sealDetached(Data([1]), key: key, iv: iv)) {
                XCTAssertEqual($0 as? CryptoError, .libraryFailure("GCM IV length"), "\(iv.count)-byte IV")
            }
        }
        let (ciphertext, tag) = try AESGCM.sealDetached(Data("m".utf8), key: key, iv: Data(count: 64))
        XCTAssertEqual(
            try AESGCM.openDetached(ciphertext, tag: tag, key: key, iv: Data(count: 64)).withUnsafeBytes { Data($0) },
            Data("m".utf8))
        for short in [Data(), tag.prefix(15)] {
            XCTAssertThrowsError(try AESGCM.openDetached(ciphertext, tag: short, key: key, iv: Data(count: 64))) {
                XCTAssertEqual($0 as? CryptoError, .authenticationFailed)
            }
        }
        // Nothing but the associated data: the tag alone authenticates it.
        let (empty, aadTag) = try AESGCM.sealDetached(Data(), key: key, iv: Data(count: 12), aad: Data("a".utf8))
        XCTAssertEqual(empty, Data())
        XCTAssertEqual(
            try AESGCM.openDetached(empty, tag: aadTag, key: key, iv: Data(count: 12), aad: Data("a".utf8)).count, 0)
        XCTAssertThrowsError(try AESGCM.openDetached(empty, tag: aadTag, key: key, iv: Data(count: 12)))
    }
}
