import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainTestSupport
import XCTest

/// The cryptography of the Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` sessions: Diffie-
/// Hellman in RFC 2409's 1024-bit group, HKDF-SHA256 with no salt and no info to a 16-byte key, and
/// AES-128-CBC with PKCS#7 padding; checked against SecretStorage's own session code and the openssl
/// command.
final class SecretServiceSessionCryptoTests: XCTestCase {
    /// The session key a shared secret gives: HKDF-SHA256, no salt, no info, 16 bytes.
    private func sessionKey(_ shared: SecureBytes) throws -> Data {
        try KeyDerivation.hkdf(key: shared, info: "", length: 16).withUnsafeBytes { Data($0) }
    }

    private func run(_ program: String, _ arguments: [String], input: Data? = nil) throws -> ChildOutput {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        return try ChildProcess.run(process, input: input)
    }

    func testTwoPairsAgreeOnA128ByteSecret() throws {
        let a = try OakleyGroup2KeyPair()
        let b = try OakleyGroup2KeyPair()
        let aPublic = try a.publicKey()
        XCTAssertEqual(aPublic.count, 128)
        XCTAssertNotEqual(aPublic, try b.publicKey())
        let one = try a.sharedSecret(withPeer: try b.publicKey())
        let other = try b.sharedSecret(withPeer: aPublic)
        XCTAssertEqual(one.count, 128)
        XCTAssertTrue(one.constantTimeEquals(other))
        // A peer key with its leading zero bytes left off, or with one more, is the same number.
        let trimmed = Data(aPublic.drop(while: { $0 == 0 }))
        XCTAssertTrue(try b.sharedSecret(withPeer: trimmed).constantTimeEquals(other))
        XCTAssertTrue(try b.sharedSecret(withPeer: Data([0]) + aPublic).constantTimeEquals(other))
    }

    /// SecretStorage (Debian's python3-secretstorage) as the client: its session key equals ours.
    func testTheSessionKeyIsSecretStoragesOwn() throws {
        let python = "/usr/bin/python3"
        let probe = try run(python, ["-c", "import secretstorage.dhcrypto"])
        guard probe.status == 0 else { throw XCTSkip("needs Debian's python3-secretstorage") }
        let server = try OakleyGroup2KeyPair()
        let script = """
            import sys
            from secretstorage.dhcrypto import Session
            s = Session()
            s.set_server_public_key(int(sys.argv[1], 16))
            print(format(s.my_public_key, 'x'))
            print(s.aes_key.hex())
            """
        let result = try run(python, ["-c", script, Hex.encode(try server.publicKey())])
        let lines = String(decoding: result.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
        XCTAssertEqual(result.status, 0, String(decoding: result.stderr, as: UTF8.self))
        guard lines.count == 2, let clientKey = Hex.decode(lines[0].count % 2 == 0 ? lines[0] : "0" + lines[0]) else {
            return XCTFail("SecretStorage said \(lines)")
        }
        XCTAssertEqual(Hex.encode(try sessionKey(try server.sharedSecret(withPeer: clientKey))), lines[1])
    }

    func testValuesThatAreNoPublicKeyAreRefused() throws {
        let pair = try OakleyGroup2KeyPair()
        let prime = try XCTUnwrap(
            Hex.decode(
                "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
                    + "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
                    + "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF"))
        var primeMinusOne = prime
        primeMinusOne[127] -= 1
        // p + 1 takes a 129th byte, since p ends in 64 one bits.
        let primePlusOne = Data([0x01]) + Data(count: 128)
        for (name, value) in [
            ("empty", Data()), ("zero", Data([0])), ("one", Data([1])), ("128 zero bytes", Data(count: 128)),
            ("p − 1", primeMinusOne), ("p", prime), ("129 bytes", primePlusOne),
            ("all ones", Data(repeating: 0xFF, count: 128)),
        ] {
            XCTAssertThrowsError(try pair.sharedSecret(withPeer: value), name) { error in
                guard case .invalidPublicKey? = error as? OakleyGroup2KeyPair.Failure else {
                    return XCTFail("\(name): \(error)")
                }
            }
        }
        XCTAssertNoThrow(try pair.sharedSecret(withPeer: Data([2])), "2, the generator, is a public key")
    }

    func testCBCIsTheOpensslCommandsAndRefusesBadPadding() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            throw XCTSkip("needs the openssl command (Debian's openssl package)")
        }
        let key = SecureBytes(copying: Array(0..<16).map { UInt8($0) })
        let iv = Data((16..<32).map { UInt8($0) })
        for plaintext in ["", "s3cret", String(repeating: "x", count: 16), String(repeating: "y", count: 33)] {
            let sealed = try AESCBC.encrypt(SecureBytes(copying: Array(plaintext.utf8)), key: key, iv: iv)
            XCTAssertEqual(sealed.count, (plaintext.utf8.count / 16 + 1) * 16, "PKCS#7 always pads")
            let command = try run(
                "/usr/bin/openssl",
                ["enc", "-aes-128-cbc", "-K", "000102030405060708090a0b0c0d0e0f", "-iv", Hex.encode(iv)],
                input: Data(plaintext.utf8))
            XCTAssertEqual(command.stdout, sealed, plaintext)
            let opened = try AESCBC.decrypt(sealed, key: key, iv: iv)
            XCTAssertEqual(opened.withUnsafeBytes { Data($0) }, Data(plaintext.utf8))
        }
        // A block that is not padded (the first of a padded message's two), a length no block makes,
        // and nothing at all: refused.
        let two = try AESCBC.encrypt(
            SecureBytes(copying: Array(String(repeating: "A", count: 16).utf8)), key: key, iv: iv)
        for bad in [two.prefix(16), two.dropLast(1), Data()] {
            XCTAssertThrowsError(try AESCBC.decrypt(Data(bad), key: key, iv: iv)) { error in
                XCTAssertEqual(error as? CryptoError, .authenticationFailed)
            }
        }
        // A fresh IV each time, and what it seals opens with it.
        let first = try AESCBC.encrypt(SecureBytes(copying: [1, 2, 3]), key: key)
        let second = try AESCBC.encrypt(SecureBytes(copying: [1, 2, 3]), key: key)
        XCTAssertNotEqual(first.iv, second.iv)
        XCTAssertEqual(
            try AESCBC.decrypt(first.ciphertext, key: key, iv: first.iv).withUnsafeBytes { Data($0) }, Data([1, 2, 3]))
        XCTAssertThrowsError(try AESCBC.encrypt(SecureBytes(copying: [1]), key: SecureBytes(copying: [1]), iv: iv))
        XCTAssertThrowsError(try AESCBC.encrypt(SecureBytes(copying: [1]), key: key, iv: Data(count: 8)))
    }
}
