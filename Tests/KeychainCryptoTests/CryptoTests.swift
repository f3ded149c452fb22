import Foundation
import KeychainBytes
import KeychainCrypto
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

final class CryptoTests: XCTestCase {
    private func hex(_ data: Data) -> String { data.hex }

    private func bytes(_ hex: String) -> Data { Data(hex: hex) }

    func testAESGCMRoundTripAndLayout() throws {
        let key = try SecureBytes(randomCount: 32)
        let plaintext = Data("attack at dawn".utf8)
        let box = try AESGCM.seal(plaintext, key: key, authenticating: Data("aad".utf8))
        XCTAssertEqual(box.count, plaintext.count + AESGCM.overhead)
        XCTAssertNil(box.range(of: plaintext), "ciphertext must not contain the plaintext")
        XCTAssertEqual(try AESGCM.open(box, key: key, authenticating: Data("aad".utf8)), plaintext)
        // Two seals of the same plaintext differ (random nonce).
        XCTAssertNotEqual(box, try AESGCM.seal(plaintext, key: key, authenticating: Data("aad".utf8)))
    }

    func testAESGCMRejectsTamperingWrongKeyAndWrongAAD() throws {
        let key = try SecureBytes(randomCount: 32)
        let box = try AESGCM.seal(Data("secret".utf8), key: key, authenticating: Data("a".utf8))
        for index in [0, 12, box.count - 1] {
            var flipped = box
            flipped[index] ^= 0x01
            XCTAssertThrowsError(try AESGCM.open(flipped, key: key, authenticating: Data("a".utf8))) {
                XCTAssertEqual($0 as? CryptoError, .authenticationFailed)
            }
        }
        XCTAssertThrowsError(try AESGCM.open(box, key: key, authenticating: Data("b".utf8)))
        XCTAssertThrowsError(
            try AESGCM.open(box, key: try SecureBytes(randomCount: 32), authenticating: Data("a".utf8)))
        XCTAssertThrowsError(try AESGCM.open(box.prefix(10), key: key, authenticating: Data("a".utf8))) {
            XCTAssertEqual($0 as? CryptoError, .malformedCiphertext)
        }
        XCTAssertThrowsError(try AESGCM.seal(Data(), key: SecureBytes(copying: [1, 2, 3]), authenticating: Data())) {
            XCTAssertEqual($0 as? CryptoError, .invalidKeySize(expected: 32, actual: 3))
        }
    }

    func testAESGCMEmptyPlaintext() throws {
        let key = try SecureBytes(randomCount: 32)
        let box = try AESGCM.seal(Data(), key: key, authenticating: Data())
        XCTAssertEqual(box.count, AESGCM.overhead)
        XCTAssertEqual(try AESGCM.open(box, key: key, authenticating: Data()), Data())
    }

    func testHMACSHA256MatchesRFC4231() throws {
        // RFC 4231 test case 2 and test case 6 (a key longer than the block).
        let short = try HMACKey(key: SecureBytes(copying: Array("Jefe".utf8)))
        XCTAssertEqual(
            hex(try short.authenticationCode(Data("what do ya want for nothing?".utf8))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        let long = try HMACKey(key: SecureBytes(copying: [UInt8](repeating: 0xaa, count: 131)))
        XCTAssertEqual(
            hex(try long.authenticationCode(Data("Test Using Larger Than Block-Size Key - Hash Key First".utf8))),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    func testHMACOverPartsEqualsHMACOverConcatenation() throws {
        let key = try HMACKey(key: SecureBytes(randomCount: 32))
        let whole = try key.authenticationCode(Data("abcdef".utf8))
        let parts = try Data("abc".utf8).withUnsafeBytes { first in
            try Data("def".utf8).withUnsafeBytes { second in try key.authenticationCode([first, second]) }
        }
        XCTAssertEqual(whole, parts)
    }

    func testPBKDF2MatchesKnownVector() throws {
        // PBKDF2-HMAC-SHA256, "password" / "salt", 1 iteration, 32 bytes (RFC 7914 §11 companion vectors).
        let derived = try KeyDerivation.pbkdf2(
            password: SecureBytes(copying: Array("password".utf8)), salt: Data("salt".utf8), iterations: 1)
        XCTAssertEqual(
            derived.withUnsafeBytes { hex(Data($0)) },
            "120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b")
    }

    func testHKDFMatchesRFC5869WithEmptySalt() throws {
        // RFC 5869 test case 3: IKM = 22 × 0x0b, no salt, no info, L = 42.
        let output = try KeyDerivation.hkdf(
            key: SecureBytes(copying: [UInt8](repeating: 0x0b, count: 22)), info: "", length: 42)
        XCTAssertEqual(
            output.withUnsafeBytes { hex(Data($0)) },
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }

    func testDigests() throws {
        XCTAssertEqual(hex(try Digest.sha1(Data("abc".utf8))), "a9993e364706816aba3e25717850c26c9cd0d89d")
        XCTAssertEqual(
            hex(try Digest.sha256(Data("abc".utf8))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        )
        XCTAssertEqual(hex(try Digest.sha1(Data())), "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    }

    func testSecureBytesConstantTimeEquality() throws {
        let a = SecureBytes(copying: [1, 2, 3])
        XCTAssertTrue(a.constantTimeEquals(SecureBytes(copying: [1, 2, 3])))
        XCTAssertFalse(a.constantTimeEquals(SecureBytes(copying: [1, 2, 4])))
        XCTAssertFalse(a.constantTimeEquals(SecureBytes(copying: [1, 2])))
        XCTAssertEqual(try SecureBytes(randomCount: 0).count, 0)
    }

    func testByteReaderRejectsTruncationInsteadOfTrapping() {
        var writer = ByteWriter()
        writer.writeString("hello")
        writer.write(UInt32(7))
        var reader = ByteReader(writer.data.prefix(6))
        XCTAssertThrowsError(try reader.readString())
        var lying = ByteReader(Data([0xff, 0xff, 0xff, 0x7f, 1]))
        XCTAssertThrowsError(try lying.readBytes())
        var ok = ByteReader(writer.data)
        XCTAssertEqual(try ok.readString(), "hello")
        XCTAssertEqual(try ok.read() as UInt32, 7)
        XCTAssertTrue(ok.isAtEnd)
    }

    /// RFC 7914, section 12: scrypt("password", "NaCl", N = 1024, r = 8, p = 16, 64 bytes).
    func testScryptKnownAnswer() throws {
        let derived = try KeyDerivation.scrypt(
            password: SecureBytes(copying: Array("password".utf8)), salt: Data("NaCl".utf8), logN: 10, r: 8, p: 16,
            length: 64)
        let expected =
            "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"
        XCTAssertEqual(derived.withUnsafeBytes { Hex.encode($0) }, expected)
        XCTAssertThrowsError(
            try KeyDerivation.scrypt(password: SecureBytes(copying: [1]), salt: Data(), logN: 0, r: 8, p: 1))
    }

    /// Keys held for long are kept out of swap and out of core dumps: their pages are locked and marked
    /// "do not dump" (smaps' VmFlags "lo" and "dd"), where RLIMIT_MEMLOCK allows locking.
    func testPinnedKeysAreLockedAndLeftOutOfDumps() throws {
        let key = try SecureBytes(randomCount: 32, pinned: true)
        let address = key.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        let flags = try XCTUnwrap(vmFlags(containing: address), "the key's mapping is in smaps")
        XCTAssertTrue(flags.contains("dd"), "left out of core dumps: \(flags)")
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(__RLIMIT_MEMLOCK.rawValue), &limit)
        if limit.rlim_cur >= 4096 { XCTAssertTrue(flags.contains("lo"), "locked in memory: \(flags)") }
        let ordinary = try SecureBytes(randomCount: 32)
        let ordinaryAddress = ordinary.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        XCTAssertFalse(vmFlags(containing: ordinaryAddress)?.contains("dd") ?? true, "short-lived keys are not pinned")
    }

    /// The VmFlags of the mapping of this process that contains `address` (from /proc/self/smaps).
    private func vmFlags(containing address: UInt) -> [String]? {
        // Read to the end: /proc files report no size, and a single read returns only the first page.
        guard let data = FileHandle(forReadingAtPath: "/proc/self/smaps")?.readDataToEndOfFile() else { return nil }
        let smaps = String(decoding: data, as: UTF8.self)
        var inside = false
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if let range = fields.first, range.contains("-"), !range.hasSuffix(":") {
                let bounds = range.split(separator: "-").compactMap { UInt($0, radix: 16) }
                inside = bounds.count == 2 && bounds[0] <= address && address < bounds[1]
            } else if inside, line.hasPrefix("VmFlags:") {
                return fields.dropFirst().map(String.init)
            }
        }
        return nil
    }
}
