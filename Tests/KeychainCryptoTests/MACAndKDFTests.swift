import Foundation
import KeychainBytes
import XCTest

@testable import KeychainCrypto

/// HMAC-SHA256 and HKDF-SHA256 against their RFCs' vectors, and what the keychain relies on besides:
/// a key shared by threads, and the derivation its stored keys were made with.
final class MACAndKDFTests: XCTestCase {
    private func mac(_ key: Data, _ message: Data) throws -> String {
        try HMACKey(key: SecureBytes(copying: key), pinned: false).authenticationCode(message).hex
    }

    /// RFC 4231 §4.2–4.8 (test case 5 compares the first 128 bits, as the RFC does).
    func testHMACSHA256MatchesEveryRFC4231Case() throws {
        let longKey = Data(repeating: 0xaa, count: 131)
        let cases: [(key: Data, message: Data, expected: String)] = [
            (
                Data(repeating: 0x0b, count: 20), Data("Hi There".utf8),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            (
                Data("Jefe".utf8), Data("what do ya want for nothing?".utf8),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            (
                Data(repeating: 0xaa, count: 20), Data(repeating: 0xdd, count: 50),
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
            ),
            (
                Data(1...25), Data(repeating: 0xcd, count: 50),
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
            ),
            (Data(repeating: 0x0c, count: 20), Data("Test With Truncation".utf8), "a3b6167473100ee06e0c796c2955552b"),
            (
                longKey, Data("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
            (
                longKey,
                Data(
                    ("This is a test using a larger than block-size key and a larger than block-size data. The key "
                        + "needs to be hashed before being used by the HMAC algorithm.").utf8),
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
            ),
        ]
        for (number, test) in cases.enumerated() {
            XCTAssertTrue(try mac(test.key, test.message).hasPrefix(test.expected), "RFC 4231 test case \(number + 1)")
        }
    }

    func testHMACWithAnEmptyKeyOrMessage() throws {
        // HMAC-SHA256 with no key and no message, as any implementation of RFC 2104 computes it.
        XCTAssertEqual(try mac(Data(), Data()), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        // No key and a key of the block's length in zeros are the same key (both are padded with zeros).
        XCTAssertEqual(try mac(Data(), Data("m".utf8)), try mac(Data(count: 64), Data("m".utf8)))
    }

    /// One key, many MACs at once: each runs in its own copy of the keyed state.
    func testOneKeySharedByThreads() throws {
        let key = try HMACKey(key: SecureBytes(copying: Data("Jefe".utf8)))
        let message = Data("what do ya want for nothing?".utf8)
        let expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        let wrong = Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<500 where (try? key.authenticationCode(message).hex) != expected {
                wrong.add(1)
            }
        }
        XCTAssertEqual(wrong.value, 0)
    }

    /// The contexts a key keeps between MACs start each MAC from the key alone: a run of messages of
    /// every length, in several threads, each gives what a key made for it alone gives, and what the
    /// RFC says for a known case.
    func testKeptContextsStartEveryMACFromTheKeyAlone() throws {
        let secret = SecureBytes(copying: Data("Jefe".utf8))
        let key = try HMACKey(key: secret)
        let messages = (0..<40).map { Data(repeating: UInt8($0), count: $0 * 7) }
        let expected = try messages.map { try HMACKey(key: secret).authenticationCode($0) }
        let wrong = Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for round in 0..<50 {
                let index = (round * 7 + thread) % messages.count
                if (try? key.authenticationCode(messages[index])) != expected[index] { wrong.add(1) }
            }
        }
        XCTAssertEqual(wrong.value, 0)
        XCTAssertEqual(
            try key.authenticationCode(Data("what do ya want for nothing?".utf8)).hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    func testHMACRefusesAShortOutputBuffer() throws {
        let key = try HMACKey(key: SecureBytes(copying: [1]))
        var short = [UInt8](repeating: 0, count: 31)
        XCTAssertThrowsError(try short.withUnsafeMutableBytes { try key.authenticationCode([], into: $0) })
    }

    /// RFC 5869 appendix A, test cases 1 to 3 (SHA-256).
    func testHKDFMatchesRFC5869() throws {
        let cases: [(ikm: Data, salt: Data, info: Data, length: Int, expected: String)] = [
            (
                Data(repeating: 0x0b, count: 22), Data(0x00...0x0c), Data(0xf0...0xf9), 42,
                "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
            ),
            (
                Data(0x00...0x4f), Data(0x60...0xaf), Data(0xb0...0xff), 82,
                "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09"
                    + "da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87"
            ),
            (
                Data(repeating: 0x0b, count: 22), Data(), Data(), 42,
                "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
            ),
        ]
        for (number, test) in cases.enumerated() {
            let output = try KeyDerivation.hkdf(
                key: SecureBytes(copying: test.ikm), salt: test.salt, info: test.info, length: test.length)
            XCTAssertEqual(output.withUnsafeBytes { Data($0).hex }, test.expected, "RFC 5869 test case \(number + 1)")
        }
    }

    /// Stored keychains' keys come from these derivations (a salt of 32 zeros, the purpose as the
    /// info), so their output may never change, at any length. The values are what the hand-written
    /// HMAC and HKDF before OpenSSL's gave, and an independent HKDF gives.
    func testHKDFOfTheKeychainsPurposesIsUnchanged() throws {
        let root = SecureBytes(copying: Data(0x00...0x1f))
        let wrap = try KeyDerivation.hkdf(key: root, info: "swift-keychain root wrap v1")
        XCTAssertEqual(
            wrap.withUnsafeBytes { Data($0).hex }, "de29d7ed2865fdca8fed54b71cccf5ac48c088576643f0976b44afbf32d329ea")
        let long = try KeyDerivation.hkdf(key: root, info: "swift-keychain root mac v1", length: 100)
        XCTAssertEqual(
            long.withUnsafeBytes { Data($0).hex },
            "b2d8185d22cec808076d2ebf9b1a1796a256e57e0a004292234b899785d195c41f020d8daf7c2fc3877b955ace095d1b"
                + "78a60f9757281056ecb76d992dda007d229de48f937ab3fa48392507f2f045b2e394edc233d70522be739aefd24372"
                + "136cf893a5")
    }

    func testHKDFBounds() throws {
        let key = SecureBytes(copying: [1, 2, 3])
        XCTAssertEqual(try KeyDerivation.hkdf(key: key, info: "x", length: 0).count, 0)
        XCTAssertEqual(try KeyDerivation.hkdf(key: key, info: "x", length: 255 * 32).count, 255 * 32)
        XCTAssertThrowsError(try KeyDerivation.hkdf(key: key, info: "x", length: 255 * 32 + 1))
        XCTAssertThrowsError(try KeyDerivation.hkdf(key: key, info: "x", length: -1))
        // A key of no bytes is a key (RFC 5869 puts no bound on the input keying material).
        XCTAssertEqual(try KeyDerivation.hkdf(key: SecureBytes(copying: []), info: "x").count, 32)
    }
}

/// A counter the test's threads share.
private final class Atomic: @unchecked Sendable {
    private let lock = NSLock()
    private var count: Int
    init(_ count: Int) { self.count = count }
    func add(_ amount: Int) { lock.withLock { count += amount } }
    var value: Int { lock.withLock { count } }
}
