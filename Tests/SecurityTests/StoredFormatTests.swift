import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import Security
import XCTest

/// A keychain made by release 0.1.0 (`keychain-test-helper make-stored-format-fixture`, committed under
/// Tests/Fixtures) opens with this build and gives back what was stored: every attribute type, a
/// guarded item, a key, an enclave key, an identity; the deleted synchronized item stays deleted. A
/// change to a stored format that forgets the old one fails here.
final class StoredFormatTests: XCTestCase {
    private var keychain: TemporaryKeychain!
    private var expected: [String: Data] = [:]

    override func setUpWithError() throws {
        keychain = TemporaryKeychain(accessGroups: ["com.example.fixture"])
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/keychain-0.1.0")
        let files = FileManager.default
        try files.copyItem(atPath: fixture.appendingPathComponent("home").path, toPath: keychain.directory)
        // Git keeps no modes; the keychain refuses files others could read.
        XCTAssertEqual(chmod(keychain.directory, 0o700), 0)
        for name in try files.contentsOfDirectory(atPath: keychain.directory) {
            XCTAssertEqual(chmod(keychain.directory + "/" + name, 0o600), 0)
        }
        let lines = try String(contentsOf: fixture.appendingPathComponent("expected.txt"), encoding: .utf8)
        for line in lines.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let bytes = Hex.decode(parts[1]) else { continue }
            expected[String(parts[0])] = bytes
        }
        XCTAssertEqual(Set(expected.keys), ["key", "enclave", "certificate"])
        _ = try KeychainServices.current().administer(.unlock(passcode: SecureBytes(copying: "fixture-passcode".utf8)))
    }

    override func tearDown() { keychain = nil }

    func testPasswordsReadBackWithEveryAttribute() throws {
        let alice: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "fixture.service",
            kSecAttrAccount as String: "alice",
        ]
        XCTAssertEqual(Item.secret(alice), "correct horse battery staple")
        let attributes = try XCTUnwrap(Item.attributes(alice))
        XCTAssertEqual(attributes[kSecAttrLabel as String] as? String, "Fixture label")
        XCTAssertEqual(attributes[kSecAttrDescription as String] as? String, "a description")
        XCTAssertEqual(attributes[kSecAttrComment as String] as? String, "a comment")
        XCTAssertEqual(attributes[kSecAttrGeneric as String] as? Data, Data([0, 1, 2, 255]))
        XCTAssertEqual((attributes[kSecAttrCreator as String] as? NSNumber)?.intValue, 0x6162_6364)
        XCTAssertEqual((attributes[kSecAttrType as String] as? NSNumber)?.intValue, 0x6e6f_7465)
        XCTAssertEqual((attributes[kSecAttrIsInvisible as String] as? NSNumber)?.boolValue, true)
        XCTAssertEqual(
            attributes[kSecAttrAccessible as String] as? String, kSecAttrAccessibleAfterFirstUnlock as String)
        let created = try XCTUnwrap(attributes[kSecAttrCreationDate as String] as? Date)
        let modified = try XCTUnwrap(attributes[kSecAttrModificationDate as String] as? Date)
        // Made on 2026-12-02: a date read with the wrong epoch lands 31 years away.
        XCTAssertEqual(created.timeIntervalSince1970, 1_796_169_600, accuracy: 86_400 * 2)
        XCTAssertEqual(modified, created)

        let bob: [String: Any] = [
            kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
            kSecAttrAccount as String: "bob",
        ]
        XCTAssertEqual(Item.secret(bob), "s3cret")
        let internet = try XCTUnwrap(Item.attributes(bob))
        XCTAssertEqual(internet[kSecAttrProtocol as String] as? String, kSecAttrProtocolHTTPS as String)
        XCTAssertEqual((internet[kSecAttrPort as String] as? NSNumber)?.intValue, 8443)
        XCTAssertEqual(internet[kSecAttrPath as String] as? String, "/login")
        XCTAssertEqual(internet[kSecAttrSecurityDomain as String] as? String, "realm")
        XCTAssertEqual(
            internet[kSecAttrAuthenticationType as String] as? String, kSecAttrAuthenticationTypeHTMLForm as String)
        XCTAssertEqual(
            internet[kSecAttrAccessible as String] as? String,
            kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String)

        let synced: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "fixture.synced",
            kSecAttrSynchronizable as String: kSecAttrSynchronizableAny,
        ]
        XCTAssertEqual(Item.copy(synced).0, errSecItemNotFound, "a deleted item stays deleted")
    }

    func testAGuardedItemKeepsItsAccessControl() throws {
        let carol: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "fixture.guarded",
            kSecAttrAccount as String: "carol",
        ]
        let attributes = try XCTUnwrap(Item.attributes(carol))
        let accessControl = try XCTUnwrap(attributes[kSecAttrAccessControl as String])
        XCTAssertTrue(CFGetTypeID(accessControl as CFTypeRef) == SecAccessControlGetTypeID())
        XCTAssertEqual(
            attributes[kSecAttrAccessible as String] as? String,
            kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly as String)
        // The user must be present: not without asking, and yes once the (simulated) sensor matches.
        var noPrompt = carol
        noPrompt[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIFail
        noPrompt[kSecReturnData as String] = true
        XCTAssertEqual(Item.copy(noPrompt).0, errSecInteractionNotAllowed)
        let service = try KeychainServices.current()
        _ = try service.biometry(.enroll)
        _ = try service.biometry(.standingAnswer(.match))
        XCTAssertEqual(Item.secret(carol), "guarded secret")
    }

    func testKeysSignAsTheKeysThatWereStored() throws {
        for (tag, name) in [("fixture.key", "key"), ("fixture.enclave", "enclave")] {
            let (status, found) = Item.copy([
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8),
                kSecReturnRef as String: true,
            ])
            XCTAssertEqual(status, errSecSuccess, name)
            let key = try XCTUnwrap(found as? SecKey, name)
            let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
            XCTAssertEqual(SecKeyCopyExternalRepresentation(publicKey, nil) as Data?, expected[name], name)
            let message = Data("stored format".utf8) as CFData
            var error: Unmanaged<CFError>?
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error), name)
            XCTAssertTrue(
                SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message, signature, &error), name)
        }
    }

    func testTheIdentityPairsItsCertificateWithItsKey() throws {
        let (status, found) = Item.copy([kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true])
        XCTAssertEqual(status, errSecSuccess)
        let identity = try XCTUnwrap(found as? SecIdentity)
        var certificate: SecCertificate?
        XCTAssertEqual(SecIdentityCopyCertificate(identity, &certificate), errSecSuccess)
        XCTAssertEqual(certificate.map { SecCertificateCopyData($0) as Data }, expected["certificate"])
        var key: SecKey?
        XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &key), errSecSuccess)
        let privateKey = try XCTUnwrap(key)
        let fromCertificate = try XCTUnwrap(certificate.flatMap { SecCertificateCopyKey($0) })
        let message = Data("identity".utf8) as CFData
        var error: Unmanaged<CFError>?
        let signature = try XCTUnwrap(
            SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message, &error))
        XCTAssertTrue(
            SecKeyVerifySignature(fromCertificate, .ecdsaSignatureMessageX962SHA256, message, signature, &error))
    }
}
