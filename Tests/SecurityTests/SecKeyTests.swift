import Foundation
import KeychainBytes
import KeychainCrypto
import Security
import XCTest

/// `SecKey` over OpenSSL: generation, external representations, signatures and RSA encryption, each
/// cross-checked against the `openssl` command in both directions, and bad input refused with the
/// documented CFError codes.
final class SecKeyTests: KeyTestCase {
    /// The code of the CFError a failing call gives, which must be in Apple's OSStatus domain.
    private func status(_ body: (UnsafeMutablePointer<Unmanaged<CFError>?>) -> AnyObject?) -> Int? {
        var error: Unmanaged<CFError>?
        let result = body(&error)
        XCTAssertNil(result)
        let failure = error?.takeRetainedValue()
        if let failure {
            XCTAssertEqual(CFErrorGetDomain(failure) as String, kCFErrorDomainOSStatus as String)
            XCTAssertFalse(failure.localizedDescription.isEmpty, "a reason")
        }
        return failure.map { CFErrorGetCode($0) }
    }

    private func key(_ data: Data, type: CFString, keyClass: CFString) -> SecKey? {
        SecKeyCreateWithData(
            data as CFData,
            [kSecAttrKeyType as String: type, kSecAttrKeyClass as String: keyClass] as CFDictionary, nil)
    }

    // MARK: Round trips

    func testEverySignatureAlgorithmRoundTripsAndATamperedSignatureFails() throws {
        let message = Data("the message to sign".utf8)
        let ecAlgorithms: [SecKeyAlgorithm] = [
            .ecdsaSignatureMessageX962SHA1, .ecdsaSignatureMessageX962SHA224, .ecdsaSignatureMessageX962SHA256,
            .ecdsaSignatureMessageX962SHA384, .ecdsaSignatureMessageX962SHA512,
        ]
        let rsaAlgorithms: [SecKeyAlgorithm] = [
            .rsaSignatureMessagePKCS1v15SHA1, .rsaSignatureMessagePKCS1v15SHA224,
            .rsaSignatureMessagePKCS1v15SHA256, .rsaSignatureMessagePKCS1v15SHA384,
            .rsaSignatureMessagePKCS1v15SHA512, .rsaSignatureMessagePSSSHA1, .rsaSignatureMessagePSSSHA224,
            .rsaSignatureMessagePSSSHA256, .rsaSignatureMessagePSSSHA384, .rsaSignatureMessagePSSSHA512,
        ]
        var cases: [(SecKey, SecKeyAlgorithm)] = []
        for bits in [256, 384, 521] {
            let key = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, bits)
            cases += ecAlgorithms.map { (key, $0) }
        }
        let rsa = try randomKey(kSecAttrKeyTypeRSA, 2048)
        cases += rsaAlgorithms.map { (rsa, $0) }
        for (privateKey, algorithm) in cases {
            let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(privateKey))
            XCTAssertTrue(SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), "\(algorithm.rawValue)")
            XCTAssertFalse(SecKeyIsAlgorithmSupported(publicKey, .sign, algorithm))
            var error: Unmanaged<CFError>?
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(privateKey, algorithm, message as CFData, &error) as Data?,
                "\(algorithm.rawValue)")
            XCTAssertTrue(SecKeyVerifySignature(publicKey, algorithm, message as CFData, signature as CFData, &error))
            var tampered = signature
            tampered[tampered.count / 2] ^= 0x01
            XCTAssertFalse(SecKeyVerifySignature(publicKey, algorithm, message as CFData, tampered as CFData, &error))
            XCTAssertEqual((error?.takeRetainedValue() as NSError?)?.code, Int(errSecVerifyFailed))
        }
        // The digest forms sign what they are given.
        let digest = Data((0..<32).map { UInt8($0) })
        for (key, algorithm) in [
            (try randomKey(kSecAttrKeyTypeEC, 256), SecKeyAlgorithm.ecdsaSignatureDigestX962SHA256),
            (rsa, .rsaSignatureDigestPKCS1v15SHA256), (rsa, .rsaSignatureDigestPSSSHA256),
        ] {
            let signature = try XCTUnwrap(SecKeyCreateSignature(key, algorithm, digest as CFData, nil))
            XCTAssertTrue(SecKeyVerifySignature(SecKeyCopyPublicKey(key)!, algorithm, digest as CFData, signature, nil))
            XCTAssertEqual(
                status { SecKeyCreateSignature(key, algorithm, Data(count: 31) as CFData, $0) }, Int(errSecParam),
                "a digest of the wrong length")
        }
    }

    func testExternalRepresentationsRoundTripInApplesEncodings() throws {
        for (bits, coordinate) in [(256, 32), (384, 48), (521, 66)] {
            let key = try randomKey(kSecAttrKeyTypeEC, bits)
            let privateBytes = try XCTUnwrap(SecKeyCopyExternalRepresentation(key, nil) as Data?)
            XCTAssertEqual(privateBytes.count, 1 + 3 * coordinate)
            XCTAssertEqual(privateBytes.first, 4)
            let publicBytes = try XCTUnwrap(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(key)!, nil) as Data?)
            XCTAssertEqual(publicBytes, privateBytes.prefix(1 + 2 * coordinate))
            let again = try XCTUnwrap(
                self.key(privateBytes, type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPrivate))
            XCTAssertEqual(again, key)
            XCTAssertEqual(SecKeyGetBlockSize(key), coordinate)
            let attributes = try XCTUnwrap(SecKeyCopyAttributes(key) as? [String: Any])
            XCTAssertEqual(attributes[kSecAttrKeySizeInBits as String] as? Int, bits)
            XCTAssertEqual(attributes[kSecAttrKeyClass as String] as? Int, 1)
            XCTAssertEqual(attributes[kSecAttrApplicationLabel as String] as? Data, sha1(publicBytes))
        }
        let rsa = try randomKey(kSecAttrKeyTypeRSA, 2048)
        let der = try XCTUnwrap(SecKeyCopyExternalRepresentation(rsa, nil) as Data?)
        XCTAssertEqual(Array(der.prefix(2)), [0x30, 0x82], "a DER SEQUENCE: PKCS#1 RSAPrivateKey")
        XCTAssertEqual(self.key(der, type: kSecAttrKeyTypeRSA, keyClass: kSecAttrKeyClassPrivate), rsa)
        XCTAssertEqual(SecKeyGetBlockSize(rsa), 256)
    }

    func testRSAEncryptionRoundTrips() throws {
        let key = try randomKey(kSecAttrKeyTypeRSA, 2048)
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
        let plaintext = Data("a session key".utf8)
        for algorithm: SecKeyAlgorithm in [
            .rsaEncryptionPKCS1, .rsaEncryptionOAEPSHA1, .rsaEncryptionOAEPSHA256, .rsaEncryptionOAEPSHA512,
        ] {
            let ciphertext = try XCTUnwrap(SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, nil))
            XCTAssertEqual((ciphertext as Data).count, 256)
            XCTAssertEqual(SecKeyCreateDecryptedData(key, algorithm, ciphertext, nil) as Data?, plaintext)
            XCTAssertEqual(
                status { SecKeyCreateDecryptedData(key, algorithm, Data(count: 256) as CFData, $0) }, Int(errSecParam))
        }
        // OAEP-SHA256 takes at most the block size less 66 bytes.
        XCTAssertNotNil(
            SecKeyCreateEncryptedData(publicKey, .rsaEncryptionOAEPSHA256, Data(count: 190) as CFData, nil))
        XCTAssertEqual(
            status { SecKeyCreateEncryptedData(publicKey, .rsaEncryptionOAEPSHA256, Data(count: 191) as CFData, $0) },
            Int(errSecParam))
    }

    func testRSAOAEPAESGCMRoundTripsInApplesLayout() throws {
        let plaintext = Data("a message longer than any RSA block could carry on its own, ".utf8)
        for bits in [2048, 4096] {
            let key = try randomKey(kSecAttrKeyTypeRSA, bits)
            let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
            let other = try randomKey(kSecAttrKeyTypeRSA, bits)
            let recipient = try XCTUnwrap(SecKeyCopyExternalRepresentation(publicKey, nil)) as Data
            let algorithms: [(SecKeyAlgorithm, SecKeyAlgorithm)] = [
                (.rsaEncryptionOAEPSHA1AESGCM, .rsaEncryptionOAEPSHA1),
                (.rsaEncryptionOAEPSHA224AESGCM, .rsaEncryptionOAEPSHA224),
                (.rsaEncryptionOAEPSHA256AESGCM, .rsaEncryptionOAEPSHA256),
                (.rsaEncryptionOAEPSHA384AESGCM, .rsaEncryptionOAEPSHA384),
                (.rsaEncryptionOAEPSHA512AESGCM, .rsaEncryptionOAEPSHA512),
            ]
            for (algorithm, oaep) in algorithms {
                XCTAssertTrue(SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm))
                XCTAssertTrue(SecKeyIsAlgorithmSupported(key, .decrypt, algorithm))
                XCTAssertFalse(SecKeyIsAlgorithmSupported(publicKey, .decrypt, algorithm))
                let sealed = try XCTUnwrap(SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, nil))
                let bytes = sealed as Data
                // wrapped session key ‖ ciphertext ‖ 16-byte tag
                XCTAssertEqual(bytes.count, bits / 8 + plaintext.count + 16, "\(algorithm.rawValue)")
                XCTAssertEqual(SecKeyCreateDecryptedData(key, algorithm, sealed, nil) as Data?, plaintext)
                // The first block is the AES session key under plain OAEP: 128-bit below 4096 bits, 256 at 4096.
                let sessionKey = try XCTUnwrap(
                    SecKeyCreateDecryptedData(key, oaep, bytes.prefix(bits / 8) as CFData, nil) as Data?)
                XCTAssertEqual(sessionKey.count, bits >= 4096 ? 32 : 16)
                // Sealed with a zero IV and the recipient's public key as additional data, and nothing else.
                let body = bytes.dropFirst(bits / 8)
                let opened = try AESGCM.openDetached(
                    Data(body.dropLast(16)), tag: Data(body.suffix(16)), key: SecureBytes(copying: sessionKey),
                    iv: Data(count: 16), aad: recipient)
                XCTAssertEqual(opened.withUnsafeBytes { Data($0) }, plaintext)
                XCTAssertThrowsError(
                    try AESGCM.openDetached(
                        Data(body.dropLast(16)), tag: Data(body.suffix(16)), key: SecureBytes(copying: sessionKey),
                        iv: Data(count: 16)))
                // Two encryptions of one message differ (a fresh session key each time).
                XCTAssertNotEqual(
                    SecKeyCreateEncryptedData(publicKey, algorithm, plaintext as CFData, nil) as Data?, bytes)
                // A changed byte anywhere, another key or a cut ciphertext: errSecParam, never a plaintext.
                for index in [0, bits / 8 + 3, bytes.count - 1] {
                    var tampered = bytes
                    tampered[index] ^= 0x01
                    XCTAssertEqual(
                        status { SecKeyCreateDecryptedData(key, algorithm, tampered as CFData, $0) }, Int(errSecParam))
                }
                XCTAssertEqual(status { SecKeyCreateDecryptedData(other, algorithm, sealed, $0) }, Int(errSecParam))
                XCTAssertEqual(
                    status { SecKeyCreateDecryptedData(key, algorithm, bytes.prefix(bits / 8 + 15) as CFData, $0) },
                    Int(errSecParam))
            }
        }
        // An EC key has no RSA-OAEP-AES-GCM.
        let ec = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, 256)
        let ecPublic = try XCTUnwrap(SecKeyCopyPublicKey(ec))
        XCTAssertFalse(SecKeyIsAlgorithmSupported(ecPublic, .encrypt, .rsaEncryptionOAEPSHA256AESGCM))
        XCTAssertEqual(
            status { SecKeyCreateEncryptedData(ecPublic, .rsaEncryptionOAEPSHA256AESGCM, Data() as CFData, $0) },
            Int(errSecParam))
        // A 1024-bit key has no room for a session key under OAEP-SHA512 (128 − 2·64 − 2 < 16 bytes),
        // and says so; SHA-384 still fits. An empty message seals to the key block and a tag.
        let small = try randomKey(kSecAttrKeyTypeRSA, 1024)
        let smallPublic = try XCTUnwrap(SecKeyCopyPublicKey(small))
        XCTAssertFalse(SecKeyIsAlgorithmSupported(smallPublic, .encrypt, .rsaEncryptionOAEPSHA512AESGCM))
        XCTAssertEqual(
            status { SecKeyCreateEncryptedData(smallPublic, .rsaEncryptionOAEPSHA512AESGCM, Data() as CFData, $0) },
            Int(errSecParam))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(smallPublic, .encrypt, .rsaEncryptionOAEPSHA384AESGCM))
        let empty = try XCTUnwrap(
            SecKeyCreateEncryptedData(smallPublic, .rsaEncryptionOAEPSHA384AESGCM, Data() as CFData, nil))
        XCTAssertEqual((empty as Data).count, 128 + 16)
        XCTAssertEqual(SecKeyCreateDecryptedData(small, .rsaEncryptionOAEPSHA384AESGCM, empty, nil) as Data?, Data())
    }

    // MARK: Against the openssl command

    private func openssl(_ arguments: [String], input: Data? = nil) throws -> (status: Int32, output: Data) {
        try OpenSSLCommand.run(arguments, in: work, input: input)
    }

    private func file(_ name: String) -> String { work + "/" + name }

    func testECSignaturesInteroperateWithOpenSSL() throws {
        XCTAssertEqual(try openssl(["ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", "k.pem"]).status, 0)
        XCTAssertEqual(try openssl(["ec", "-in", "k.pem", "-outform", "DER", "-out", "k.der"]).status, 0)
        XCTAssertEqual(try openssl(["ec", "-in", "k.pem", "-pubout", "-out", "pub.pem"]).status, 0)
        XCTAssertEqual(try openssl(["ec", "-in", "k.pem", "-pubout", "-outform", "DER", "-out", "pub.der"]).status, 0)
        let sec1 = try Data(contentsOf: URL(fileURLWithPath: file("k.der")))
        let spki = try Data(contentsOf: URL(fileURLWithPath: file("pub.der")))
        // SEC1 ECPrivateKey: 30 77 02 01 01 04 20 <scalar>; the SPKI ends with the X9.63 point.
        XCTAssertEqual(Array(sec1.prefix(7)), [0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20])
        let point = spki.suffix(65)
        let privateKey = try XCTUnwrap(
            key(point + sec1.dropFirst(7).prefix(32), type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPrivate))
        let publicKey = try XCTUnwrap(key(Data(point), type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPublic))
        XCTAssertEqual(SecKeyCopyPublicKey(privateKey), publicKey)

        let message = Data("signed by swift-keychain".utf8)
        try message.write(to: URL(fileURLWithPath: file("m")))
        let ours = try XCTUnwrap(
            SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message as CFData, nil) as Data?)
        try ours.write(to: URL(fileURLWithPath: file("ours.sig")))
        let verified = try openssl(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "ours.sig", "m"])
        XCTAssertEqual(verified.status, 0, String(decoding: verified.output, as: UTF8.self))
        XCTAssertEqual(try openssl(["dgst", "-sha256", "-sign", "k.pem", "-out", "theirs.sig", "m"]).status, 0)
        let theirs = try Data(contentsOf: URL(fileURLWithPath: file("theirs.sig")))
        XCTAssertTrue(
            SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, theirs as CFData, nil)
        )
    }

    func testRSASignaturesAndEncryptionInteroperateWithOpenSSL() throws {
        XCTAssertEqual(try openssl(["genrsa", "-out", "r.pem", "2048"]).status, 0)
        XCTAssertEqual(
            try openssl(["rsa", "-in", "r.pem", "-outform", "DER", "-traditional", "-out", "r.der"]).status, 0)
        XCTAssertEqual(try openssl(["rsa", "-in", "r.pem", "-pubout", "-out", "rpub.pem"]).status, 0)
        XCTAssertEqual(
            try openssl(["rsa", "-in", "r.pem", "-RSAPublicKey_out", "-outform", "DER", "-out", "rpub.der"]).status, 0)
        let privateKey = try XCTUnwrap(
            key(
                try Data(contentsOf: URL(fileURLWithPath: file("r.der"))), type: kSecAttrKeyTypeRSA,
                keyClass: kSecAttrKeyClassPrivate))
        let publicKey = try XCTUnwrap(
            key(
                try Data(contentsOf: URL(fileURLWithPath: file("rpub.der"))), type: kSecAttrKeyTypeRSA,
                keyClass: kSecAttrKeyClassPublic))
        let message = Data("signed by swift-keychain".utf8)
        try message.write(to: URL(fileURLWithPath: file("m")))
        for (algorithm, digest, options) in [
            (SecKeyAlgorithm.rsaSignatureMessagePKCS1v15SHA256, "-sha256", [String]()),
            (
                .rsaSignatureMessagePSSSHA256, "-sha256",
                ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]
            ),
            // Apple's SHA-224 PSS name says 24, but its salt is the digest's 28 bytes.
            (
                .rsaSignatureMessagePSSSHA224, "-sha224",
                ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:28"]
            ),
        ] {
            let ours = try XCTUnwrap(SecKeyCreateSignature(privateKey, algorithm, message as CFData, nil) as Data?)
            try ours.write(to: URL(fileURLWithPath: file("ours.sig")))
            let verified = try openssl(
                ["dgst", digest] + options + ["-verify", "rpub.pem", "-signature", "ours.sig", "m"])
            XCTAssertEqual(verified.status, 0, "\(algorithm.rawValue)")
            XCTAssertEqual(
                try openssl(["dgst", digest] + options + ["-sign", "r.pem", "-out", "t.sig", "m"]).status, 0)
            let theirs = try Data(contentsOf: URL(fileURLWithPath: file("t.sig")))
            XCTAssertTrue(SecKeyVerifySignature(publicKey, algorithm, message as CFData, theirs as CFData, nil))
        }
        // OAEP-SHA256 from us, decrypted by openssl.
        let secret = Data("wrapped for openssl".utf8)
        let ciphertext = try XCTUnwrap(
            SecKeyCreateEncryptedData(publicKey, .rsaEncryptionOAEPSHA256, secret as CFData, nil) as Data?)
        let decrypted = try openssl(
            [
                "pkeyutl", "-decrypt", "-inkey", "r.pem", "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt",
                "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256",
            ], input: ciphertext)
        XCTAssertEqual(decrypted.output, secret)
    }

    func testECDHAgreesOnBothSidesAndWithOpenSSL() throws {
        let alice = try randomKey(kSecAttrKeyTypeEC, 256)
        let bob = try randomKey(kSecAttrKeyTypeEC, 256)
        let alicePublic = try XCTUnwrap(SecKeyCopyPublicKey(alice))
        let bobPublic = try XCTUnwrap(SecKeyCopyPublicKey(bob))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(alice, .keyExchange, .ecdhKeyExchangeStandard))
        let empty = [String: Any]() as CFDictionary
        let one = try XCTUnwrap(
            SecKeyCopyKeyExchangeResult(alice, .ecdhKeyExchangeStandard, bobPublic, empty, nil) as Data?)
        let two = try XCTUnwrap(
            SecKeyCopyKeyExchangeResult(bob, .ecdhKeyExchangeCofactor, alicePublic, empty, nil) as Data?)
        XCTAssertEqual(one, two)
        XCTAssertEqual(one.count, 32)
        let parameters =
            [
                kSecKeyKeyExchangeParameterRequestedSize as String: 16,
                kSecKeyKeyExchangeParameterSharedInfo as String: Data([0xaa, 0xbb]),
            ] as CFDictionary
        let derived = try XCTUnwrap(
            SecKeyCopyKeyExchangeResult(alice, .ecdhKeyExchangeStandardX963SHA256, bobPublic, parameters, nil) as Data?)
        XCTAssertEqual(
            derived,
            SecKeyCopyKeyExchangeResult(bob, .ecdhKeyExchangeCofactorX963SHA256, alicePublic, parameters, nil) as Data?)
        XCTAssertEqual(derived.count, 16)
        // openssl derives the same secret from the exported keys, and its X9.63 KDF the same bytes.
        let hex = Hex.encode(one)
        let kdf = try openssl([
            "kdf", "-keylen", "16", "-kdfopt", "digest:SHA256", "-kdfopt", "hexkey:\(hex)", "-kdfopt", "hexinfo:aabb",
            "X963KDF",
        ])
        XCTAssertEqual(kdf.status, 0)
        XCTAssertEqual(
            String(decoding: kdf.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
            derived.map { String(format: "%02X", $0) }.joined(separator: ":"))
        // Without a requested size an X9.63 exchange is refused; another curve's key too.
        XCTAssertEqual(
            status { SecKeyCopyKeyExchangeResult(alice, .ecdhKeyExchangeStandardX963SHA256, bobPublic, empty, $0) },
            Int(errSecParam))
        let other = try XCTUnwrap(SecKeyCopyPublicKey(try randomKey(kSecAttrKeyTypeEC, 384)))
        XCTAssertEqual(
            status { SecKeyCopyKeyExchangeResult(alice, .ecdhKeyExchangeStandard, other, empty, $0) }, Int(errSecParam))
    }

    func testECIESRoundTripsInApplesLayout() throws {
        let message = Data("sealed for the holder of the private key".utf8)
        for (bits, point) in [(256, 65), (384, 97), (521, 133)] {
            let key = try randomKey(kSecAttrKeyTypeEC, bits)
            let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
            for algorithm: SecKeyAlgorithm in [
                .eciesEncryptionStandardX963SHA256AESGCM, .eciesEncryptionCofactorX963SHA256AESGCM,
                .eciesEncryptionStandardVariableIVX963SHA256AESGCM, .eciesEncryptionCofactorVariableIVX963SHA512AESGCM,
            ] {
                XCTAssertTrue(SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm))
                XCTAssertFalse(SecKeyIsAlgorithmSupported(publicKey, .decrypt, algorithm))
                let sealed = try XCTUnwrap(
                    SecKeyCreateEncryptedData(publicKey, algorithm, message as CFData, nil) as Data?)
                // ephemeral public key ‖ ciphertext ‖ 16-byte tag
                XCTAssertEqual(sealed.count, point + message.count + 16)
                XCTAssertEqual(sealed.first, 4)
                XCTAssertEqual(SecKeyCreateDecryptedData(key, algorithm, sealed as CFData, nil) as Data?, message)
                var tampered = sealed
                tampered[point + 3] ^= 1
                XCTAssertEqual(
                    status { SecKeyCreateDecryptedData(key, algorithm, tampered as CFData, $0) }, Int(errSecParam))
                // The ephemeral key's ECDH with the recipient, through the X9.63 KDF with the ephemeral key
                // as shared info, is what the two ends agree on: a fresh key each time.
                let again = try XCTUnwrap(
                    SecKeyCreateEncryptedData(publicKey, algorithm, message as CFData, nil) as Data?)
                XCTAssertNotEqual(again.prefix(point), sealed.prefix(point))
            }
            XCTAssertEqual(
                status {
                    SecKeyCreateDecryptedData(
                        key, .eciesEncryptionStandardX963SHA256AESGCM, Data(count: 20) as CFData, $0)
                },
                Int(errSecParam), "shorter than a point and a tag")
        }
    }

    // MARK: Bad input

    func testBadParametersAndBlobsAreRefusedWithTheirCodes() throws {
        func create(_ parameters: [String: Any]) -> Int? {
            status { SecKeyCreateRandomKey(parameters as CFDictionary, $0) }
        }
        XCTAssertEqual(create([kSecAttrKeySizeInBits as String: 256]), Int(errSecParam))
        XCTAssertEqual(
            create([kSecAttrKeyType as String: "99", kSecAttrKeySizeInBits as String: 256]), Int(errSecParam))
        for bits in [512, 1000, 1023, 8200, 16384] {
            XCTAssertEqual(
                create([kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: bits]),
                Int(errSecKeySizeNotAllowed), "RSA \(bits)")
        }
        for bits in [128, 255, 512] {
            XCTAssertEqual(
                create([kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: bits]),
                Int(errSecKeySizeNotAllowed), "EC \(bits)")
        }
        // An enclave key is a 256-bit EC key (the rest of its rules: EnclaveKeyTests).
        XCTAssertEqual(
            create([
                kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
            ]), Int(errSecParam))

        let ec = try randomKey(kSecAttrKeyTypeEC, 256)
        var point = try XCTUnwrap(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(ec)!, nil) as Data?)
        func refused(_ bytes: Data, _ type: CFString, _ keyClass: CFString) -> Int? {
            status {
                SecKeyCreateWithData(
                    bytes as CFData,
                    [kSecAttrKeyType as String: type, kSecAttrKeyClass as String: keyClass] as CFDictionary, $0)
            }
        }
        XCTAssertEqual(refused(Data(), kSecAttrKeyTypeEC, kSecAttrKeyClassPublic), Int(errSecParam))
        XCTAssertEqual(refused(point.dropLast(), kSecAttrKeyTypeEC, kSecAttrKeyClassPublic), Int(errSecParam))
        point[40] ^= 0x55  // off the curve
        XCTAssertEqual(refused(point, kSecAttrKeyTypeEC, kSecAttrKeyClassPublic), Int(errSecParam))
        XCTAssertEqual(refused(Data("garbage".utf8), kSecAttrKeyTypeRSA, kSecAttrKeyClassPublic), Int(errSecParam))
        // An RSA public key whose exponent is even, or huge, is refused before any use: built by hand as
        // PKCS#1 RSAPublicKey { modulus, exponent } around a real 2048-bit modulus.
        let rsa = try XCTUnwrap(SecKeyCopyPublicKey(try randomKey(kSecAttrKeyTypeRSA, 2048)))
        let real = try XCTUnwrap(SecKeyCopyExternalRepresentation(rsa, nil) as Data?)
        // 30 82 01 0a | 02 82 01 01 <257 bytes modulus> | 02 03 01 00 01
        let modulus = real[real.startIndex + 4..<real.startIndex + 4 + 4 + 257]
        func publicKey(exponent: [UInt8]) -> Data {
            var body = Data(modulus)
            body.append(contentsOf: [0x02] + derLength(exponent.count) + exponent)
            return Data([0x30] + derLength(body.count)) + body
        }
        XCTAssertNotNil(
            key(publicKey(exponent: [0x01, 0x00, 0x01]), type: kSecAttrKeyTypeRSA, keyClass: kSecAttrKeyClassPublic))
        XCTAssertEqual(
            refused(publicKey(exponent: [0x01, 0x00, 0x00]), kSecAttrKeyTypeRSA, kSecAttrKeyClassPublic),
            Int(errSecParam), "even")
        XCTAssertEqual(
            refused(
                publicKey(exponent: [0x01] + [UInt8](repeating: 0, count: 2_000) + [0x01]), kSecAttrKeyTypeRSA,
                kSecAttrKeyClassPublic),
            Int(errSecParam), "16,000 bits of exponent")
        // A modulus too small (256 bits) or too large (8,800 bits) to be used.
        func publicKey(modulusBytes: Int) -> Data {
            let modulus = [0x00, 0xc3] + [UInt8](repeating: 0x5a, count: modulusBytes - 2) + [0x01]
            var body = Data([0x02] + derLength(modulus.count) + modulus)
            body.append(contentsOf: [0x02, 0x03, 0x01, 0x00, 0x01])
            return Data([0x30] + derLength(body.count)) + body
        }
        XCTAssertEqual(
            refused(publicKey(modulusBytes: 32), kSecAttrKeyTypeRSA, kSecAttrKeyClassPublic), Int(errSecParam),
            "a 256-bit modulus")
        XCTAssertEqual(
            refused(publicKey(modulusBytes: 1_100), kSecAttrKeyTypeRSA, kSecAttrKeyClassPublic), Int(errSecParam),
            "an 8,800-bit modulus")
        XCTAssertNotNil(
            key(publicKey(modulusBytes: 128), type: kSecAttrKeyTypeRSA, keyClass: kSecAttrKeyClassPublic),
            "the same construction at 1,024 bits is a key")
        XCTAssertEqual(
            refused(Data(repeating: 0x30, count: 300), kSecAttrKeyTypeRSA, kSecAttrKeyClassPrivate), Int(errSecParam))
        XCTAssertEqual(
            status {
                SecKeyCreateWithData(
                    Data([4]) as CFData, [kSecAttrKeyType as String: kSecAttrKeyTypeEC] as CFDictionary, $0)
            }, Int(errSecParam), "no key class")
        // An algorithm that is not the key's.
        XCTAssertEqual(
            status { SecKeyCreateSignature(ec, .rsaSignatureMessagePKCS1v15SHA256, Data() as CFData, $0) },
            Int(errSecParam))
        XCTAssertEqual(
            status {
                SecKeyCreateSignature(ec, SecKeyAlgorithm(rawValue: "algid:made:up" as CFString), Data() as CFData, $0)
            },
            Int(errSecParam))
        XCTAssertEqual(
            status { SecKeyCreateEncryptedData(ec, .rsaEncryptionOAEPSHA256, Data() as CFData, $0) }, Int(errSecParam))
    }

    func testMutatedKeyBlobsNeverCrashTheParsers() throws {
        let ec = try XCTUnwrap(SecKeyCopyExternalRepresentation(try randomKey(kSecAttrKeyTypeEC, 256), nil) as Data?)
        let rsa = try XCTUnwrap(SecKeyCopyExternalRepresentation(try randomKey(kSecAttrKeyTypeRSA, 1024), nil) as Data?)
        var generator = SystemRandomNumberGenerator()
        var accepted = 0
        for iteration in 0..<3_000 {
            let (seed, type): (Data, CFString) =
                iteration % 2 == 0 ? (ec, kSecAttrKeyTypeEC) : (rsa, kSecAttrKeyTypeRSA)
            var bytes = seed
            switch Int.random(in: 0..<4, using: &generator) {
            case 0: bytes = bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator))
            case 1:
                for _ in 0..<Int.random(in: 1...8, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(
                        in: 0...255, using: &generator)
                }
            case 2:
                bytes.append(
                    contentsOf: (0..<Int.random(in: 1...64, using: &generator)).map { _ in UInt8.random(in: 0...255) })
            default:
                bytes = Data((0..<Int.random(in: 0...600, using: &generator)).map { _ in UInt8.random(in: 0...255) })
            }
            for keyClass in [kSecAttrKeyClassPrivate, kSecAttrKeyClassPublic]
            where key(bytes, type: type, keyClass: keyClass) != nil {
                accepted += 1
            }
        }
        XCTAssertLessThan(accepted, 3_000, "most mutations are refused")
    }

    private func sha1(_ data: Data) -> Data { SHA1.digest(data) }
}

/// A DER length in its short or long form.
private func derLength(_ length: Int) -> [UInt8] {
    if length < 0x80 { return [UInt8(length)] }
    var bytes: [UInt8] = []
    var rest = length
    while rest > 0 {
        bytes.insert(UInt8(rest & 0xff), at: 0)
        rest >>= 8
    }
    return [0x80 | UInt8(bytes.count)] + bytes
}

/// SHA-1 for the test's expectations, written out so that the test does not use what it checks.
private enum SHA1 {
    static func digest(_ data: Data) -> Data {
        var h: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var message = [UInt8](data)
        let length = UInt64(message.count) * 8
        message.append(0x80)
        while message.count % 64 != 56 { message.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { message.append(UInt8((length >> UInt64(shift)) & 0xff)) }
        for chunk in stride(from: 0, to: message.count, by: 64) {
            var w = [UInt32](repeating: 0, count: 80)
            for i in 0..<16 {
                w[i] = message[chunk + 4 * i..<chunk + 4 * i + 4].reduce(0) { $0 << 8 | UInt32($1) }
            }
            for i in 16..<80 {
                let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
                w[i] = x << 1 | x >> 31
            }
            var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
            for i in 0..<80 {
                let (f, k): (UInt32, UInt32) =
                    i < 20
                    ? ((b & c) | (~b & d), 0x5A82_7999)
                    : i < 40
                        ? (b ^ c ^ d, 0x6ED9_EBA1)
                        : i < 60 ? ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC) : (b ^ c ^ d, 0xCA62_C1D6)
                let temp = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
                (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, temp)
            }
            h = [h[0] &+ a, h[1] &+ b, h[2] &+ c, h[3] &+ d, h[4] &+ e]
        }
        return Data(h.flatMap { value in (0..<4).reversed().map { UInt8((value >> UInt32($0 * 8)) & 0xff) } })
    }
}
