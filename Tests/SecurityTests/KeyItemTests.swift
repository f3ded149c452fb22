import Foundation
import Security
import XCTest

/// Keys in the keychain: made permanent at creation or added by `kSecValueRef`, found by tag, label,
/// type and class, returned as `SecKey` with `kSecReturnRef`, unique by Apple's key primary key.
final class KeyItemTests: KeychainTestCase {
    private let tag = Data("com.example.keys.signing".utf8)

    private func permanentKey(_ type: CFString = kSecAttrKeyTypeECSECPrimeRandom, bits: Int = 256) throws -> SecKey {
        var error: Unmanaged<CFError>?
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: type, kSecAttrKeySizeInBits as String: bits,
            kSecPrivateKeyAttrs as String: [
                kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag,
                kSecAttrLabel as String: "signing key",
            ],
        ]
        guard let key = SecKeyCreateRandomKey(parameters as CFDictionary, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        return key
    }

    private func find(_ extra: [String: Any]) -> (OSStatus, AnyObject?) {
        var query: [String: Any] = [kSecClass as String: kSecClassKey]
        query.merge(extra) { $1 }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, result)
    }

    func testAPermanentKeyIsFoundByItsTagAndSignsAsItself() throws {
        let key = try permanentKey()
        let (status, found) = find([
            kSecAttrApplicationTag as String: tag, kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecReturnRef as String: true,
        ])
        XCTAssertEqual(status, errSecSuccess)
        let stored = try XCTUnwrap(found as? SecKey)
        XCTAssertEqual(CFGetTypeID(stored), SecKeyGetTypeID())
        XCTAssertEqual(stored, key)
        let message = Data("signed by a stored key".utf8)
        let signature = try XCTUnwrap(
            SecKeyCreateSignature(stored, .ecdsaSignatureMessageX962SHA256, message as CFData, nil))
        XCTAssertTrue(
            SecKeyVerifySignature(
                SecKeyCopyPublicKey(key)!, .ecdsaSignatureMessageX962SHA256, message as CFData, signature, nil))
        // Only the private key was made permanent.
        XCTAssertEqual(
            find([kSecAttrKeyClass as String: kSecAttrKeyClassPublic, kSecReturnRef as String: true]).0,
            errSecItemNotFound)
        // Attributes: Apple's, with klbl the SHA-1 of the public key and the key's class and size.
        let (_, attributes) = find([
            kSecAttrApplicationTag as String: tag, kSecReturnAttributes as String: true, kSecReturnRef as String: true,
        ])
        let dictionary = try XCTUnwrap(attributes as? [String: Any])
        XCTAssertEqual(dictionary[kSecValueRef as String] as? SecKey, key)
        XCTAssertEqual(dictionary[kSecAttrKeyClass as String] as? Int, 1)
        XCTAssertEqual(dictionary[kSecAttrKeySizeInBits as String] as? Int, 256)
        XCTAssertEqual(dictionary[kSecAttrLabel as String] as? String, "signing key")
        XCTAssertNil(dictionary[kSecValueData as String], "the key's data only when asked for")
        let label = try XCTUnwrap(dictionary[kSecAttrApplicationLabel as String] as? Data)
        XCTAssertEqual(
            label, (SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrApplicationLabel as String] as? Data)
        XCTAssertEqual(
            find([kSecAttrApplicationLabel as String: label, kSecReturnRef as String: true]).1 as? SecKey, key)
    }

    func testKeysAddedByReferenceAreUniqueAndDeletedByReference() throws {
        var error: Unmanaged<CFError>?
        let key = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048] as CFDictionary,
                &error))
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
        let add: [String: Any] = [kSecValueRef as String: key, kSecAttrApplicationTag as String: tag]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecDuplicateItem)
        // The public half of the same key is another item (another key class).
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: publicKey] as CFDictionary, nil), errSecSuccess)
        var result: CFTypeRef?
        let all: [String: Any] = [
            kSecClass as String: kSecClassKey, kSecMatchLimit as String: kSecMatchLimitAll,
            kSecReturnRef as String: true,
        ]
        XCTAssertEqual(SecItemCopyMatching(all as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(Set((result as? [SecKey]) ?? []), [key, publicKey])
        // A key added by reference into another class is refused.
        XCTAssertEqual(
            SecItemAdd(
                [kSecClass as String: kSecClassGenericPassword, kSecValueRef as String: key] as CFDictionary, nil),
            errSecParam)
        // What a key is, is the key's to say: a private key cannot be stored as a public one.
        let mislabelled = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256] as CFDictionary,
                nil))
        XCTAssertEqual(
            SecItemAdd(
                [kSecValueRef as String: mislabelled, kSecAttrKeyClass as String: kSecAttrKeyClassPublic]
                    as CFDictionary,
                nil), errSecParam)
        XCTAssertEqual(SecItemDelete([kSecValueRef as String: key] as CFDictionary), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(all as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? [SecKey], [publicKey])
    }

    func testStoredKeysCarryApplesAttributesAndAreFoundByLabelTypeAndClass() throws {
        let signing = try permanentKey()
        let other = try permanentKey(kSecAttrKeyTypeRSA, bits: 2048)
        // Two different keys under one tag and one label both fit (their klbl differs).
        let (status, found) = find([
            kSecAttrApplicationTag as String: tag, kSecMatchLimit as String: kSecMatchLimitAll,
            kSecReturnAttributes as String: true, kSecReturnRef as String: true,
        ])
        XCTAssertEqual(status, errSecSuccess)
        let items = try XCTUnwrap(found as? [[String: Any]])
        XCTAssertEqual(items.count, 2)
        for item in items {
            let key = try XCTUnwrap(item[kSecValueRef as String] as? SecKey)
            let isEC = key == signing
            XCTAssertTrue(isEC || key == other)
            // Apple's attributes of a stored private key (spec 8.1): its type and class as numbers, and
            // what it may do.
            XCTAssertEqual(item[kSecAttrKeyType as String] as? Int, isEC ? 73 : 42)
            XCTAssertEqual(item[kSecAttrKeyClass as String] as? Int, 1)
            XCTAssertEqual(item[kSecAttrKeySizeInBits as String] as? Int, isEC ? 256 : 2048)
            XCTAssertEqual(item[kSecAttrEffectiveKeySize as String] as? Int, isEC ? 256 : 2048)
            for (name, expected) in [
                (kSecAttrCanSign, true), (kSecAttrCanDecrypt, true), (kSecAttrCanUnwrap, true),
                (kSecAttrCanDerive, true), (kSecAttrCanVerify, false), (kSecAttrCanEncrypt, false),
                (kSecAttrCanWrap, false), (kSecAttrIsPermanent, true), (kSecAttrIsExtractable, true),
            ] {
                XCTAssertEqual(item[name as String] as? Bool, expected, "\(name) of \(isEC ? "EC" : "RSA")")
            }
        }
        // Found by label, by type, by class.
        XCTAssertEqual(
            find([
                kSecAttrLabel as String: "signing key", kSecAttrKeyType as String: kSecAttrKeyTypeRSA,
                kSecReturnRef as String: true,
            ]).1 as? SecKey, other)
        XCTAssertEqual(
            find([
                kSecAttrLabel as String: "signing key", kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecReturnRef as String: true,
            ]).1 as? SecKey, signing)
        XCTAssertEqual(find([kSecAttrLabel as String: "another label"]).0, errSecItemNotFound)
        XCTAssertEqual(
            find([kSecAttrKeyClass as String: kSecAttrKeyClassPublic, kSecAttrApplicationTag as String: tag]).0,
            errSecItemNotFound)
    }
}
