import Foundation
import KeychainBytes
import Security
import XCTest

/// Published known-answer vectors: RFC 6979 appendix A.2.5 (ECDSA over P-256, key x = C9AF…6721),
/// whose deterministic signatures any correct verifier must accept, and whose public point any correct
/// scalar multiplication must give. Edited copies of the same signatures must fail.
final class KnownAnswerTests: XCTestCase {
    private static let privateScalar = "C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721"
    private static let publicX = "60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6"
    private static let publicY = "7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299"

    /// (message, algorithm, r, s) from RFC 6979 A.2.5.
    private static let signatures: [(String, SecKeyAlgorithm, String, String)] = [
        (
            "sample", .ecdsaSignatureMessageX962SHA1,
            "61340C88C3AAEBEB4F6D667F672CA9759A6CCAA9FA8811313039EE4A35471D32",
            "6D7F147DAC089441BB2E2FE8F7A3FA264B9C475098FDCF6E00D7C996E1B8B7EB"
        ),
        (
            "sample", .ecdsaSignatureMessageX962SHA224,
            "53B2FFF5D1752B2C689DF257C04C40A587FABABB3F6FC2702F1343AF7CA9AA3F",
            "B9AFB64FDC03DC1A131C7D2386D11E349F070AA432A4ACC918BEA988BF75C74C"
        ),
        (
            "sample", .ecdsaSignatureMessageX962SHA256,
            "EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716",
            "F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"
        ),
        (
            "sample", .ecdsaSignatureMessageX962SHA384,
            "0EAFEA039B20E9B42309FB1D89E213057CBF973DC0CFC8F129EDDDC800EF7719",
            "4861F0491E6998B9455193E34E7B0D284DDD7149A74B95B9261F13ABDE940954"
        ),
        (
            "sample", .ecdsaSignatureMessageX962SHA512,
            "8496A60B5E9B47C825488827E0495B0E3FA109EC4568FD3F8D1097678EB97F00",
            "2362AB1ADBE2B8ADF9CB9EDAB740EA6049C028114F2460F96554F61FAE3302FE"
        ),
        (
            "test", .ecdsaSignatureMessageX962SHA256,
            "F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367",
            "019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083"
        ),
    ]

    private func hex(_ text: String) -> Data { Hex.decode(text) ?? Data() }

    /// An X9.62 DER signature: SEQUENCE { INTEGER r, INTEGER s }, each minimal and positive.
    private func der(_ r: Data, _ s: Data) -> Data {
        func integer(_ value: Data) -> Data {
            var bytes = Data(value.drop { $0 == 0 })
            if let first = bytes.first, first & 0x80 != 0 { bytes.insert(0, at: 0) }
            return Data([0x02, UInt8(bytes.count)]) + bytes
        }
        let body = integer(r) + integer(s)
        return Data([0x30, UInt8(body.count)]) + body
    }

    private func privateKey() throws -> SecKey {
        let blob = Data([0x04]) + hex(Self.publicX) + hex(Self.publicY) + hex(Self.privateScalar)
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
        ]
        return try XCTUnwrap(SecKeyCreateWithData(blob as CFData, attributes as CFDictionary, nil))
    }

    func testTheRFC6979KeyHasItsPublishedPublicPoint() throws {
        // A private key whose point is not x·G is refused: the generator G is on the curve but is not
        // this key's point, so it must fail beside the published scalar, and the published point pass.
        let generator =
            "6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296"
            + "4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5"
        let wrongPoint = Data([0x04]) + hex(generator) + hex(Self.privateScalar)
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
        ]
        XCTAssertNil(SecKeyCreateWithData(wrongPoint as CFData, attributes as CFDictionary, nil))
        let generatorKey: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
        ]
        XCTAssertNotNil(
            SecKeyCreateWithData((Data([0x04]) + hex(generator)) as CFData, generatorKey as CFDictionary, nil))
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(try privateKey()))
        XCTAssertEqual(
            SecKeyCopyExternalRepresentation(publicKey, nil) as Data?,
            Data([0x04]) + hex(Self.publicX) + hex(Self.publicY))
    }

    func testTheRFC6979SignaturesVerifyAndEditedOnesDoNot() throws {
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(try privateKey()))
        for (message, algorithm, r, s) in Self.signatures {
            let signed = Data(message.utf8) as CFData
            let signature = der(hex(r), hex(s))
            XCTAssertTrue(
                SecKeyVerifySignature(publicKey, algorithm, signed, signature as CFData, nil),
                "\(message) \(algorithm.rawValue)")
            // Another message, a flipped bit in r or s, or r and s swapped: refused.
            XCTAssertFalse(
                SecKeyVerifySignature(publicKey, algorithm, Data("Sample".utf8) as CFData, signature as CFData, nil))
            var flipped = hex(s)
            flipped[flipped.count - 1] ^= 0x01
            XCTAssertFalse(SecKeyVerifySignature(publicKey, algorithm, signed, der(hex(r), flipped) as CFData, nil))
            XCTAssertFalse(SecKeyVerifySignature(publicKey, algorithm, signed, der(hex(s), hex(r)) as CFData, nil))
            // Not DER: a trailing byte, or a length in long form, is no signature (no malleability).
            XCTAssertFalse(
                SecKeyVerifySignature(publicKey, algorithm, signed, (signature + Data([0])) as CFData, nil))
            let longForm = Data([0x30, 0x81]) + signature.dropFirst(1)
            XCTAssertFalse(SecKeyVerifySignature(publicKey, algorithm, signed, longForm as CFData, nil))
        }
        // The digest forms take the published hash itself: SHA-256("sample").
        let digest = hex("AF2BDBE1AA9B6EC1E2ADE1D694F41FC71A831D0268E9891562113D8A62ADD1BF")
        let (_, _, r, s) = Self.signatures[2]
        XCTAssertTrue(
            SecKeyVerifySignature(
                publicKey, .ecdsaSignatureDigestX962SHA256, digest as CFData, der(hex(r), hex(s)) as CFData, nil))
        // A signature made here over the same key verifies (ECDSA here is randomized, so never equal).
        let made = try XCTUnwrap(
            SecKeyCreateSignature(
                try privateKey(), .ecdsaSignatureMessageX962SHA256, Data("sample".utf8) as CFData, nil))
        XCTAssertNotEqual(made as Data, der(hex(r), hex(s)))
        XCTAssertTrue(
            SecKeyVerifySignature(
                publicKey, .ecdsaSignatureMessageX962SHA256, Data("sample".utf8) as CFData, made, nil))
    }

    // MARK: Project Wycheproof

    /// (tcId, message, signature, valid) from Project Wycheproof's `ecdsa_secp256r1_sha256_test.json`
    /// (C2SP/wycheproof, testvectors_v1; Apache-2.0): valid signatures, and copies whose DER is
    /// bent (a missing leading zero, long-form and padded lengths, lengths off by one or overflowing),
    /// which a strict verifier refuses. The first four are under the first test group's key, the
    /// rest under the second's.
    private static let wycheproofKeys = [
        "0404aaec73635726f213fb8a9e64da3b8632e41495a944d0045b522eba7240fad5"
            + "87d9315798aaa3a5ba01775787ced05eaaf7b4e09fc81d6d1aa546e8365d525d",
        "042927b10512bae3eddcfe467828128bad2903269919f7086069c8c4df6c732838"
            + "c7787964eaac00e5921fb1498a60f4606766b3d9685001558d1a974e7341513e",
    ]
    private static let wycheproofBody =
        "02202ba3a8be6b94d5ec80a6d9d1190a436effe50d85a1eee859b8cc6af9bd5c2e18"
        + "022100b329f479a2bbd0a5c384ee1493b1f5186a87139cac5df4087c134b49156847db"
    private static let wycheproofVectors: [(Int, String, String, Bool)] = [
        (
            1, "",
            "3045022100b292a619339f6e567a305c951c0dcbcc42d16e47f219f9e98e76e09d8770b34a02200177e60492c5a8242f76f07bfe3661bde59ec2a17ce5bd2dab2abebdf89a62e2",
            true
        ),
        (
            2, "4d7367",
            "30450220530bd6b0c9af2d69ba897f6b5fb59695cfbf33afe66dbadcf5b8d2a2a6538e23022100d85e489cb7a161fd55ededcedbf4cc0c0987e3e3f0f242cae934c72caa3f43e9",
            true
        ),
        (
            3, "313233343030",
            "3046022100a8ea150cb80125d7381c4c1f1da8e9de2711f9917060406a73d7904519e51388022100f3ab9fa68bd47973a73b2d40480c2ba50c22c9d76ec217257288293285449b86",
            true
        ),
        (
            4, "0000000000000000000000000000000000000000",
            "3045022100986e65933ef2ed4ee5aada139f52b70539aaf63f00a91f29c69178490d57fb7102203dafedfb8da6189d372308cbf1489bbbdabf0c0217d1c0ff0f701aaa7a694b9c",
            true
        ),
        (
            5, "313233343030",
            "304402202ba3a8be6b94d5ec80a6d9d1190a436effe50d85a1eee859b8cc6af9bd5c2e1802204cd60b855d442f5b3c7b11eb6c4e0ae7525fe710fab9aa7c77a67f79e6fadd76",
            true
        ),
        (
            6, "313233343030",
            "304402202ba3a8be6b94d5ec80a6d9d1190a436effe50d85a1eee859b8cc6af9bd5c2e180220b329f479a2bbd0a5c384ee1493b1f5186a87139cac5df4087c134b49156847db",
            false
        ),
        (7, "313233343030", "3045" + wycheproofBody, true),
        (8, "313233343030", "308145" + wycheproofBody, false),
        (9, "313233343030", "30820045" + wycheproofBody, false),
        (10, "313233343030", "3046" + wycheproofBody, false),
        (11, "313233343030", "3044" + wycheproofBody, false),
        (12, "313233343030", "30850100000045" + wycheproofBody, false),
        (13, "313233343030", "3089010000000000000045" + wycheproofBody, false),
        (14, "313233343030", "30847fffffff" + wycheproofBody, false),
        (16, "313233343030", "3084ffffffff" + wycheproofBody, false),
        (18, "313233343030", "3088ffffffffffffffff" + wycheproofBody, false),
    ]

    func testWycheproofECDSAP256SignaturesAreJudgedAsTheSuiteSays() throws {
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
        ]
        let keys = try Self.wycheproofKeys.map {
            try XCTUnwrap(SecKeyCreateWithData(hex($0) as CFData, attributes as CFDictionary, nil))
        }
        for (tcId, message, signature, valid) in Self.wycheproofVectors {
            let key = tcId <= 4 ? keys[0] : keys[1]
            var error: Unmanaged<CFError>?
            let verified = SecKeyVerifySignature(
                key, .ecdsaSignatureMessageX962SHA256, hex(message) as CFData, hex(signature) as CFData, &error)
            XCTAssertEqual(verified, valid, "Wycheproof tcId \(tcId)")
            if !valid {
                XCTAssertEqual(error.map { CFErrorGetCode($0.takeRetainedValue()) }, Int(errSecVerifyFailed))
            }
        }
    }
}
