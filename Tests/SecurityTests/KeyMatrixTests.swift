import Foundation
import Security
import XCTest

/// Every key size and every hash sibling of every algorithm: round trips on each, and the operations
/// that have an independent implementation at hand (the `openssl` command) checked against it in both
/// directions on each NIST curve and for RSA encryption.
final class KeyMatrixTests: KeyTestCase {
    private let hashes = ["SHA1", "SHA224", "SHA256", "SHA384", "SHA512"]
    private let hashLengths = ["SHA1": 20, "SHA224": 28, "SHA256": 32, "SHA384": 48, "SHA512": 64]

    private func algorithm(_ name: String) -> SecKeyAlgorithm { SecKeyAlgorithm(rawValue: name as CFString) }

    private func publicKey(_ data: Data, _ type: CFString) -> SecKey? {
        SecKeyCreateWithData(
            data as CFData,
            [kSecAttrKeyType as String: type, kSecAttrKeyClass as String: kSecAttrKeyClassPublic] as CFDictionary,
            nil)
    }

    private func signsAndVerifies(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ input: Data) -> Bool {
        guard let publicKey = SecKeyCopyPublicKey(key),
            let signature = SecKeyCreateSignature(key, algorithm, input as CFData, nil) as Data?
        else { return false }
        var tampered = signature
        tampered[tampered.count - 1] ^= 0x01
        return SecKeyVerifySignature(publicKey, algorithm, input as CFData, signature as CFData, nil)
            && !SecKeyVerifySignature(publicKey, algorithm, input as CFData, tampered as CFData, nil)
    }

    // MARK: Round trips

    func testEveryCurveSignsWithEveryHashInBothForms() throws {
        let message = Data("the same message on every curve".utf8)
        for bits in [192, 224, 256, 384, 521] {
            let key = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, bits)
            for hash in hashes {
                let messageForm = algorithm("algid:sign:ECDSA:message-X962:\(hash)")
                let digest = algorithm("algid:sign:ECDSA:digest-X962:\(hash)")
                XCTAssertTrue(signsAndVerifies(key, messageForm, message), "P-\(bits) \(hash) message")
                let input = Data((0..<(hashLengths[hash] ?? 0)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
                XCTAssertTrue(signsAndVerifies(key, digest, input), "P-\(bits) \(hash) digest")
            }
            XCTAssertEqual(SecKeyGetBlockSize(key), (bits + 7) / 8)
            // Digests of any length without a named hash, in DER and as RFC 4754's r ‖ s.
            let coordinate = (bits + 7) / 8
            for length in [20, 32, 64, 100] {
                let digest = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 13) })
                XCTAssertTrue(signsAndVerifies(key, .ecdsaSignatureDigestX962, digest), "P-\(bits) digest \(length)")
                XCTAssertTrue(signsAndVerifies(key, .ecdsaSignatureRFC4754, digest), "P-\(bits) RFC 4754 \(length)")
                let raw = try XCTUnwrap(
                    SecKeyCreateSignature(key, .ecdsaSignatureRFC4754, digest as CFData, nil) as Data?)
                XCTAssertEqual(raw.count, 2 * coordinate)
                XCTAssertFalse(
                    SecKeyVerifySignature(
                        SecKeyCopyPublicKey(key)!, .ecdsaSignatureRFC4754, digest as CFData, raw.dropLast() as CFData,
                        nil), "r ‖ s one byte short")
            }
        }
    }

    func testEveryRSASizeSignsAndEncryptsWithEverySiblingThatFits() throws {
        let plaintext = Data("a session key".utf8)
        for bits in [1024, 3072, 4096, 8192] {
            let key = try randomKey(kSecAttrKeyTypeRSA, bits)
            let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key), "RSA-\(bits)")
            let bytes = bits / 8
            XCTAssertEqual(SecKeyGetBlockSize(key), bytes)
            // The largest key takes the common algorithms; the others every sibling.
            let chosen = bits == 8192 ? ["SHA256"] : hashes
            for hash in chosen {
                let length = hashLengths[hash] ?? 0
                XCTAssertTrue(
                    signsAndVerifies(key, algorithm("algid:sign:RSA:message-PKCS1v15:\(hash)"), Data("m".utf8)),
                    "RSA-\(bits) PKCS#1 \(hash)")
                XCTAssertTrue(
                    signsAndVerifies(key, algorithm("algid:sign:RSA:digest-PKCS1v15:\(hash)"), Data(count: length)),
                    "RSA-\(bits) PKCS#1 digest \(hash)")
                // PSS needs the digest, an equally long salt and two bytes within the modulus.
                let salt = hash == "SHA224" ? "24" : "\(length)"
                let pss = algorithm("algid:sign:RSA:message-PSS:\(hash):\(hash):\(salt)")
                if 2 * length + 2 <= bytes {
                    XCTAssertTrue(signsAndVerifies(key, pss, Data("m".utf8)), "RSA-\(bits) PSS \(hash)")
                } else {
                    XCTAssertNil(
                        SecKeyCreateSignature(key, pss, Data("m".utf8) as CFData, nil), "RSA-\(bits) PSS \(hash)")
                }
                // OAEP takes at most the block size less twice the digest and two bytes; the hybrid form
                // wraps a 16-byte session key (32 from 4096 bits) that way.
                let oaep = algorithm("algid:encrypt:RSA:OAEP:\(hash)")
                let hybrid = algorithm("algid:encrypt:RSA:OAEP:\(hash):AESGCM")
                let sessionKey = bits >= 4096 ? 32 : 16
                for (name, fits) in [
                    (oaep, 2 * length + 2 + plaintext.count <= bytes), (hybrid, 2 * length + 2 + sessionKey <= bytes),
                ] {
                    let sealed = SecKeyCreateEncryptedData(publicKey, name, plaintext as CFData, nil)
                    if fits {
                        XCTAssertEqual(
                            sealed.flatMap { SecKeyCreateDecryptedData(key, name, $0, nil) } as Data?, plaintext,
                            "RSA-\(bits) \(name.rawValue)")
                    } else {
                        XCTAssertNil(sealed, "RSA-\(bits) \(name.rawValue) cannot fit")
                    }
                }
            }
            let sealed = try XCTUnwrap(
                SecKeyCreateEncryptedData(publicKey, .rsaEncryptionPKCS1, plaintext as CFData, nil))
            XCTAssertEqual(SecKeyCreateDecryptedData(key, .rsaEncryptionPKCS1, sealed, nil) as Data?, plaintext)
            // Raw RSA, both ways: an input of the key's size (below the modulus), unpadded.
            let block = Data([0x00]) + Data(repeating: 0x5a, count: bytes - 1)
            XCTAssertTrue(signsAndVerifies(key, .rsaSignatureRaw, block), "RSA-\(bits) raw signature")
            XCTAssertNil(SecKeyCreateSignature(key, .rsaSignatureRaw, block.dropFirst() as CFData, nil))
            let rawSealed = try XCTUnwrap(SecKeyCreateEncryptedData(publicKey, .rsaEncryptionRaw, block as CFData, nil))
            XCTAssertEqual(SecKeyCreateDecryptedData(key, .rsaEncryptionRaw, rawSealed, nil) as Data?, block)
            XCTAssertNil(SecKeyCreateEncryptedData(publicKey, .rsaEncryptionRaw, plaintext as CFData, nil))
            // An input of the key's size that is not below its modulus is the caller's error.
            let tooLarge = Data(repeating: 0xff, count: bytes)
            for attempt in [
                { SecKeyCreateEncryptedData(publicKey, .rsaEncryptionRaw, tooLarge as CFData, $0) },
                { SecKeyCreateSignature(key, .rsaSignatureRaw, tooLarge as CFData, $0) },
            ] as [(UnsafeMutablePointer<Unmanaged<CFError>?>) -> CFData?] {
                var error: Unmanaged<CFError>?
                XCTAssertNil(attempt(&error))
                XCTAssertEqual(error.map { CFErrorGetCode($0.takeRetainedValue()) }, Int(errSecParam))
            }
            // The raw PKCS#1 v1.5 form signs what it is given, up to the block size less 11 bytes.
            XCTAssertTrue(signsAndVerifies(key, .rsaSignatureDigestPKCS1v15Raw, Data(count: bytes - 11)))
            XCTAssertNil(
                SecKeyCreateSignature(key, .rsaSignatureDigestPKCS1v15Raw, Data(count: bytes - 10) as CFData, nil))
        }
    }

    func testKeyExchangeAndECIESOnEveryCurveWithEveryHash() throws {
        let plaintext = Data("for the holder of the private key".utf8)
        for bits in [192, 224, 256, 384, 521] {
            let alice = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, bits)
            let bob = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, bits)
            let alicePublic = try XCTUnwrap(SecKeyCopyPublicKey(alice))
            let bobPublic = try XCTUnwrap(SecKeyCopyPublicKey(bob))
            for exchange in ["ECDH", "ECDHC"] {
                let raw = algorithm("algid:keyexchange:\(exchange)")
                let ours = SecKeyCopyKeyExchangeResult(alice, raw, bobPublic, [:] as CFDictionary, nil) as Data?
                XCTAssertEqual(ours?.count, (bits + 7) / 8)
                XCTAssertEqual(
                    ours, SecKeyCopyKeyExchangeResult(bob, raw, alicePublic, [:] as CFDictionary, nil) as Data?)
                for hash in hashes {
                    let kdf = algorithm("algid:keyexchange:\(exchange):KDFX963:\(hash)")
                    let parameters =
                        [
                            SecKeyKeyExchangeParameter.requestedSize.rawValue as String: 48,
                            SecKeyKeyExchangeParameter.sharedInfo.rawValue as String: Data("info".utf8),
                        ] as CFDictionary
                    let derived = SecKeyCopyKeyExchangeResult(alice, kdf, bobPublic, parameters, nil) as Data?
                    XCTAssertEqual(derived?.count, 48, "P-\(bits) \(exchange) \(hash)")
                    XCTAssertEqual(
                        derived, SecKeyCopyKeyExchangeResult(bob, kdf, alicePublic, parameters, nil) as Data?)
                }
            }
            for hash in hashes {
                var names = [
                    "algid:encrypt:ECIES:ECDH:KDFX963:\(hash):AESGCM",
                    "algid:encrypt:ECIES:ECDHC:KDFX963:\(hash):AESGCM",
                ]
                if hash != "SHA1" {
                    names += [
                        "algid:encrypt:ECIES:ECDH:KDFX963:\(hash):AESGCM-KDFIV",
                        "algid:encrypt:ECIES:ECDHC:KDFX963:\(hash):AESGCM-KDFIV",
                    ]
                }
                for name in names {
                    let ecies = algorithm(name)
                    let sealed = SecKeyCreateEncryptedData(bobPublic, ecies, plaintext as CFData, nil)
                    XCTAssertEqual(
                        sealed.flatMap { SecKeyCreateDecryptedData(bob, ecies, $0, nil) } as Data?, plaintext,
                        "P-\(bits) \(name)")
                    XCTAssertNil(sealed.flatMap { SecKeyCreateDecryptedData(alice, ecies, $0, nil) }, "another key")
                }
            }
        }
    }

    // MARK: Against the openssl command

    @discardableResult
    private func openssl(_ arguments: [String], input: Data? = nil) throws -> Data {
        let (status, output) = try OpenSSLCommand.run(arguments, in: work, input: input)
        XCTAssertEqual(status, 0, "openssl \(arguments.joined(separator: " "))")
        return output
    }

    private func write(_ data: Data, _ name: String) throws {
        try data.write(to: URL(fileURLWithPath: work + "/" + name))
    }

    private func read(_ name: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: work + "/" + name)) }

    /// A SubjectPublicKeyInfo for an X9.63 point on a named curve (OID content bytes given).
    private func subjectPublicKeyInfo(point: Data, curveOID: [UInt8]) -> Data {
        func tlv(_ tag: UInt8, _ body: Data) -> Data {
            var length: [UInt8] = body.count < 0x80 ? [UInt8(body.count)] : [0x81, UInt8(body.count)]
            if body.count > 0xff { length = [0x82, UInt8(body.count >> 8), UInt8(body.count & 0xff)] }
            return Data([tag] + length) + body
        }
        let ecPublicKey = tlv(0x06, Data([0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]))
        let algorithm = tlv(0x30, ecPublicKey + tlv(0x06, Data(curveOID)))
        return tlv(0x30, algorithm + tlv(0x03, Data([0]) + point))
    }

    /// An ECDSA DER signature from r and s, written out here rather than with the code under test.
    private func derSignature(r: Data, s: Data) -> Data {
        func integer(_ value: Data) -> [UInt8] {
            var bytes = Array(value.drop { $0 == 0 })
            if bytes.isEmpty { bytes = [0] }
            if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
            return [0x02, UInt8(bytes.count)] + bytes
        }
        let body = integer(r) + integer(s)
        return Data((body.count < 0x80 ? [0x30, UInt8(body.count)] : [0x30, 0x81, UInt8(body.count)]) + body)
    }

    /// r and s of an ECDSA DER signature (short or one-byte long lengths, as openssl writes them).
    private func integers(ofDER der: Data) -> (Data, Data)? {
        let bytes = [UInt8](der)
        var index = bytes.count > 1 && bytes[1] == 0x81 ? 3 : 2
        func next() -> Data? {
            guard index + 2 <= bytes.count, bytes[index] == 0x02 else { return nil }
            let length = Int(bytes[index + 1])
            guard index + 2 + length <= bytes.count else { return nil }
            defer { index += 2 + length }
            return Data(bytes[index + 2..<index + 2 + length])
        }
        guard let r = next(), let s = next() else { return nil }
        return (r, s)
    }

    private func padded(_ value: Data, _ size: Int) -> Data {
        let trimmed = value.drop { $0 == 0 }
        return Data(repeating: 0, count: max(0, size - trimmed.count)) + trimmed
    }

    func testECDHAndSignaturesAgreeWithOpenSSLOnEveryNISTCurve() throws {
        let curves: [(bits: Int, name: String, oid: [UInt8], hash: String)] = [
            (256, "prime256v1", [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07], "SHA384"),
            (384, "secp384r1", [0x2b, 0x81, 0x04, 0x00, 0x22], "SHA384"),
            (521, "secp521r1", [0x2b, 0x81, 0x04, 0x00, 0x23], "SHA512"),
        ]
        let message = Data("signed on both sides".utf8)
        try write(message, "m")
        for curve in curves {
            // openssl's key, and its public point as ours.
            try openssl(["ecparam", "-genkey", "-name", curve.name, "-noout", "-out", "theirs.pem"])
            try openssl(["ec", "-in", "theirs.pem", "-pubout", "-outform", "DER", "-out", "theirs.der"])
            let pointLength = 1 + 2 * ((curve.bits + 7) / 8)
            let theirPublic = try XCTUnwrap(
                publicKey(try read("theirs.der").suffix(pointLength), kSecAttrKeyTypeECSECPrimeRandom))
            // Our key, and its public key as openssl's.
            let ours = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, curve.bits)
            let ourPoint = try XCTUnwrap(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(ours)!, nil) as Data?)
            try write(subjectPublicKeyInfo(point: ourPoint, curveOID: curve.oid), "ours.der")
            try openssl(["pkey", "-pubin", "-inform", "DER", "-in", "ours.der", "-out", "ours.pem"])
            // ECDH: the same secret on both sides.
            let secret = SecKeyCopyKeyExchangeResult(
                ours, .ecdhKeyExchangeStandard, theirPublic, [:] as CFDictionary, nil)
            let derived = try openssl(["pkeyutl", "-derive", "-inkey", "theirs.pem", "-peerkey", "ours.pem"])
            XCTAssertEqual(secret as Data?, derived, "ECDH on \(curve.name)")
            // Signatures with the curve's hash, each side verifying the other's.
            let ecdsa = algorithm("algid:sign:ECDSA:message-X962:\(curve.hash)")
            let signature = try XCTUnwrap(SecKeyCreateSignature(ours, ecdsa, message as CFData, nil) as Data?)
            try write(signature, "ours.sig")
            try openssl([
                "dgst", "-\(curve.hash.lowercased())", "-verify", "ours.pem", "-signature", "ours.sig", "m",
            ])
            try openssl(["dgst", "-\(curve.hash.lowercased())", "-sign", "theirs.pem", "-out", "theirs.sig", "m"])
            XCTAssertTrue(
                SecKeyVerifySignature(theirPublic, ecdsa, message as CFData, try read("theirs.sig") as CFData, nil),
                "openssl's \(curve.name) signature")
            // RFC 4754's r ‖ s over a digest: ours, put into DER here, verifies with openssl; openssl's DER,
            // taken apart here, verifies with us.
            let coordinate = (curve.bits + 7) / 8
            let digest = Data((0..<48).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 1) })
            try write(digest, "digest")
            let raw = try XCTUnwrap(SecKeyCreateSignature(ours, .ecdsaSignatureRFC4754, digest as CFData, nil) as Data?)
            XCTAssertEqual(raw.count, 2 * coordinate)
            try write(derSignature(r: raw.prefix(coordinate), s: raw.suffix(coordinate)), "ours-raw.sig")
            try openssl([
                "pkeyutl", "-verify", "-pubin", "-inkey", "ours.pem", "-in", "digest", "-sigfile", "ours-raw.sig",
            ])
            try openssl(["pkeyutl", "-sign", "-inkey", "theirs.pem", "-in", "digest", "-out", "theirs-digest.sig"])
            let (r, s) = try XCTUnwrap(integers(ofDER: try read("theirs-digest.sig")))
            let theirsRaw = padded(r, coordinate) + padded(s, coordinate)
            XCTAssertTrue(
                SecKeyVerifySignature(theirPublic, .ecdsaSignatureRFC4754, digest as CFData, theirsRaw as CFData, nil),
                "openssl's \(curve.name) digest signature as r ‖ s")
        }
    }

    func testRSAEncryptionInteroperatesWithOpenSSLInBothDirections() throws {
        let plaintext = Data("a key to carry".utf8)
        try openssl(["genrsa", "-out", "theirs.pem", "2048"])
        try openssl(["rsa", "-in", "theirs.pem", "-RSAPublicKey_out", "-outform", "DER", "-out", "theirs.der"])
        let theirPublic = try XCTUnwrap(publicKey(try read("theirs.der"), kSecAttrKeyTypeRSA))
        let ours = try randomKey(kSecAttrKeyTypeRSA, 2048)
        try write(try XCTUnwrap(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(ours)!, nil) as Data?), "ours.der")
        try openssl(["rsa", "-RSAPublicKey_in", "-inform", "DER", "-in", "ours.der", "-pubout", "-out", "ours.pem"])
        try write(plaintext, "plain")
        let paddings: [(SecKeyAlgorithm, [String])] = [
            (.rsaEncryptionPKCS1, ["-pkeyopt", "rsa_padding_mode:pkcs1"]),
            (.rsaEncryptionOAEPSHA1, ["-pkeyopt", "rsa_padding_mode:oaep"]),
            (
                .rsaEncryptionOAEPSHA256,
                [
                    "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt",
                    "rsa_mgf1_md:sha256",
                ]
            ),
            (
                .rsaEncryptionOAEPSHA512,
                [
                    "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha512", "-pkeyopt",
                    "rsa_mgf1_md:sha512",
                ]
            ),
        ]
        for (algorithm, options) in paddings {
            // openssl encrypts to our key; we decrypt.
            let sealed = try openssl(["pkeyutl", "-encrypt", "-pubin", "-inkey", "ours.pem", "-in", "plain"] + options)
            XCTAssertEqual(
                SecKeyCreateDecryptedData(ours, algorithm, sealed as CFData, nil) as Data?, plaintext,
                "\(algorithm.rawValue) from openssl")
            // We encrypt to openssl's key; it decrypts.
            let ciphertext = try XCTUnwrap(
                SecKeyCreateEncryptedData(theirPublic, algorithm, plaintext as CFData, nil) as Data?)
            try write(ciphertext, "sealed")
            let opened = try openssl(["pkeyutl", "-decrypt", "-inkey", "theirs.pem", "-in", "sealed"] + options)
            XCTAssertEqual(opened, plaintext, "\(algorithm.rawValue) to openssl")
        }
    }
}
