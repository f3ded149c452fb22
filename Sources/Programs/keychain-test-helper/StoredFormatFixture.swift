import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import Security

/// Makes the keychain that `StoredFormatTests` opens: one of each kind of stored record this build
/// writes (items with every attribute type, a guarded item, a key, an enclave key, an identity, a
/// tombstone, a passcode), in `directory/home`, with the random parts the test cannot know written
/// beside it in `directory/expected.txt`. Run with a release's helper when a stored format changes,
/// so that the keychains that release made stay readable: the fixture is that proof.
func makeStoredFormatFixture(at directory: String) throws {
    let home = (directory as NSString).appendingPathComponent("home")
    setenv("KEYCHAIN_HOME", home, 1)
    setenv("KEYCHAIN_SOCKET", "", 1)
    setenv("KEYCHAIN_ACCESS_GROUPS", "com.example.fixture", 1)
    setenv("KEYCHAIN_LOG", "off", 1)
    _ = try KeychainServices.current().administer(
        .setPasscode(new: SecureBytes(copying: "fixture-passcode".utf8), current: nil))

    try add([
        kSecClass: kSecClassGenericPassword, kSecAttrService: "fixture.service", kSecAttrAccount: "alice",
        kSecAttrLabel: "Fixture label", kSecAttrDescription: "a description", kSecAttrComment: "a comment",
        kSecAttrGeneric: Data([0, 1, 2, 255]), kSecAttrCreator: 0x6162_6364, kSecAttrType: 0x6e6f_7465,
        kSecAttrIsInvisible: true, kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
        kSecValueData: Data("correct horse battery staple".utf8),
    ])
    try add([
        kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "bob",
        kSecAttrProtocol: kSecAttrProtocolHTTPS, kSecAttrPort: 8443, kSecAttrPath: "/login",
        kSecAttrAuthenticationType: kSecAttrAuthenticationTypeHTMLForm, kSecAttrSecurityDomain: "realm",
        kSecAttrAccessible: kSecAttrAccessibleWhenUnlockedThisDeviceOnly, kSecValueData: Data("s3cret".utf8),
    ])
    var error: Unmanaged<CFError>?
    guard
        let guarded = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, .userPresence, &error)
    else { throw FixtureFailure("access control") }
    try add([
        kSecClass: kSecClassGenericPassword, kSecAttrService: "fixture.guarded", kSecAttrAccount: "carol",
        kSecAttrAccessControl: guarded, kSecValueData: Data("guarded secret".utf8),
    ])
    try add([
        kSecClass: kSecClassGenericPassword, kSecAttrService: "fixture.synced", kSecAttrAccount: "dave",
        kSecAttrSynchronizable: true, kSecValueData: Data("gone".utf8),
    ])
    let deleted = SecItemDelete(
        [kSecClass: kSecClassGenericPassword, kSecAttrService: "fixture.synced", kSecAttrSynchronizable: true]
            as CFDictionary)
    guard deleted == errSecSuccess else { throw FixtureFailure("delete \(deleted)") }

    var expected = ""
    let keyAttributes: [CFString: Any] = [
        kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
        kSecPrivateKeyAttrs: [
            kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("fixture.key".utf8),
            kSecAttrLabel: "fixture key",
        ] as [CFString: Any],
    ]
    guard let key = SecKeyCreateRandomKey(keyAttributes as CFDictionary, &error) else {
        throw FixtureFailure("key")
    }
    expected += "key \(try publicKeyHex(of: key))\n"
    let enclaveAttributes: [CFString: Any] = [
        kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
        kSecAttrTokenID: kSecAttrTokenIDSecureEnclave,
        kSecPrivateKeyAttrs: [
            kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("fixture.enclave".utf8),
        ] as [CFString: Any],
    ]
    guard let enclave = SecKeyCreateRandomKey(enclaveAttributes as CFDictionary, &error) else {
        throw FixtureFailure("enclave key")
    }
    expected += "enclave \(try publicKeyHex(of: enclave))\n"

    let bundle = try identityBundle(in: directory)
    var imported: CFArray?
    let importStatus = SecPKCS12Import(
        bundle as CFData, [kSecImportExportPassphrase: "fixture"] as CFDictionary, &imported)
    guard importStatus == errSecSuccess, let entries = imported as? [[String: Any]],
        let identity = entries.first?[kSecImportItemIdentity as String] as? SecIdentity
    else { throw FixtureFailure("import \(importStatus)") }
    try add([kSecValueRef: identity, kSecAttrLabel: "fixture identity"])
    var certificate: SecCertificate?
    guard SecIdentityCopyCertificate(identity, &certificate) == errSecSuccess, let certificate else {
        throw FixtureFailure("certificate")
    }
    expected += "certificate \(Hex.encode(SecCertificateCopyData(certificate) as Data))\n"
    try expected.write(
        toFile: (directory as NSString).appendingPathComponent("expected.txt"), atomically: true, encoding: .utf8)
}

struct FixtureFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private func add(_ attributes: [CFString: Any]) throws {
    let status = SecItemAdd(attributes as CFDictionary, nil)
    guard status == errSecSuccess else { throw FixtureFailure("add \(attributes[kSecClass] ?? "ref"): \(status)") }
}

private func publicKeyHex(of key: SecKey) throws -> String {
    var error: Unmanaged<CFError>?
    guard let publicKey = SecKeyCopyPublicKey(key),
        let bytes = SecKeyCopyExternalRepresentation(publicKey, &error) as Data?
    else { throw FixtureFailure("public key") }
    return Hex.encode(bytes)
}

/// A PKCS#12 bundle of a self-signed P-256 certificate and its key, made by the openssl command.
private func identityBundle(in directory: String) throws -> Data {
    let work = (directory as NSString).appendingPathComponent("openssl")
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: work) }
    let key = (work as NSString).appendingPathComponent("key.pem")
    let certificate = (work as NSString).appendingPathComponent("certificate.pem")
    let bundle = (work as NSString).appendingPathComponent("bundle.p12")
    try openssl([
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
        "/CN=Stored format fixture", "-days", "36500", "-keyout", key, "-out", certificate,
    ])
    try openssl([
        "pkcs12", "-export", "-inkey", key, "-in", certificate, "-passout", "pass:fixture", "-out", bundle,
    ])
    return try Data(contentsOf: URL(fileURLWithPath: bundle))
}

private func openssl(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw FixtureFailure("openssl \(arguments[0])") }
}
