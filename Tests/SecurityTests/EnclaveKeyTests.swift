import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import LocalAuthentication
import Security
import XCTest

/// Enclave keys (`kSecAttrTokenIDSecureEnclave`): P-256 keys made and used by the keychain service,
/// whose private key no answer carries; usable for signing, key exchange and ECIES under their access
/// control; refused for every other size, type, token or use. Runs embedded and, through
/// `ThroughDaemonTests`, with the daemon holding the key.
final class EnclaveKeyTests: KeychainTestCase {
    private let tag = Data("com.example.enclave.signing".utf8)

    private var service: any KeychainService {
        get throws { try KeychainServices.current() }
    }

    private func parameters(_ extra: [String: Any] = [:], privateExtra: [String: Any] = [:]) -> [String: Any] {
        var privateAttributes: [String: Any] = [kSecAttrApplicationTag as String: tag]
        privateAttributes.merge(privateExtra) { $1 }
        var parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave, kSecPrivateKeyAttrs as String: privateAttributes,
        ]
        parameters.merge(extra) { $1 }
        return parameters
    }

    private func enclaveKey(_ extra: [String: Any] = [:], privateExtra: [String: Any] = [:]) throws -> SecKey {
        var error: Unmanaged<CFError>?
        guard let key = SecKeyCreateRandomKey(parameters(extra, privateExtra: privateExtra) as CFDictionary, &error)
        else { throw error!.takeRetainedValue() as Error }
        return key
    }

    /// The OSStatus of a creation that must fail.
    private func creationStatus(_ parameters: [String: Any]) -> Int? {
        var error: Unmanaged<CFError>?
        let key = SecKeyCreateRandomKey(parameters as CFDictionary, &error)
        XCTAssertNil(key)
        let failure = error?.takeRetainedValue()
        if let failure { XCTAssertEqual(CFErrorGetDomain(failure) as String, kCFErrorDomainOSStatus as String) }
        return failure.map { CFErrorGetCode($0) }
    }

    private func find(_ extra: [String: Any]) -> (OSStatus, AnyObject?) {
        var query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag]
        query.merge(extra) { $1 }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, result)
    }

    private func sign(_ key: SecKey, _ message: Data, _ algorithm: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA256)
        -> (Data?, Int?)
    {
        var error: Unmanaged<CFError>?
        let signature = SecKeyCreateSignature(key, algorithm, message as CFData, &error) as Data?
        return (signature, error.map { CFErrorGetCode($0.takeRetainedValue()) })
    }

    private func verifies(_ key: SecKey, _ message: Data, _ signature: Data, _ algorithm: SecKeyAlgorithm) -> Bool {
        guard let publicKey = SecKeyCopyPublicKey(key) else { return false }
        return SecKeyVerifySignature(publicKey, algorithm, message as CFData, signature as CFData, nil)
    }

    // MARK: Making and using

    func testAnEnclaveKeySignsAndNeverGivesUpItsPrivateKey() throws {
        let key = try enclaveKey()
        XCTAssertEqual(SecKeyGetBlockSize(key), 32)
        // Never exportable; its public key is.
        var error: Unmanaged<CFError>?
        XCTAssertNil(SecKeyCopyExternalRepresentation(key, &error))
        XCTAssertEqual(error.map { CFErrorGetCode($0.takeRetainedValue()) }, Int(errSecUnimplemented))
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
        let publicBytes = try XCTUnwrap(SecKeyCopyExternalRepresentation(publicKey, nil) as Data?)
        XCTAssertEqual(publicBytes.count, 65)
        XCTAssertEqual(publicBytes.first, 4)
        // Signatures of messages and of digests, each verifying with the public key.
        let message = Data("signed inside the keychain".utf8)
        let (signature, failure) = sign(key, message)
        XCTAssertNil(failure)
        XCTAssertTrue(verifies(key, message, try XCTUnwrap(signature), .ecdsaSignatureMessageX962SHA256))
        XCTAssertFalse(
            verifies(key, Data("another message".utf8), try XCTUnwrap(signature), .ecdsaSignatureMessageX962SHA256))
        let digest = Data(repeating: 0x5a, count: 48)
        let (digestSignature, _) = sign(key, digest, .ecdsaSignatureDigestX962SHA384)
        XCTAssertTrue(verifies(key, digest, try XCTUnwrap(digestSignature), .ecdsaSignatureDigestX962SHA384))
        // A digest of the wrong length, and RSA algorithms, are refused.
        XCTAssertEqual(sign(key, Data(count: 20), .ecdsaSignatureDigestX962SHA256).1, Int(errSecParam))
        XCTAssertEqual(sign(key, message, .rsaSignatureMessagePKCS1v15SHA256).1, Int(errSecParam))
        // RFC 4754's r ‖ s, over a digest, verifies as a software key's does.
        let raw = try XCTUnwrap(sign(key, digest, .ecdsaSignatureRFC4754).0)
        XCTAssertEqual(raw.count, 64)
        XCTAssertTrue(verifies(key, digest, raw, .ecdsaSignatureRFC4754))
        XCTAssertEqual(sign(key, Data(count: 33), .ecdsaSignatureDigestX962).1, Int(errSecParam))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(key, .sign, .ecdsaSignatureMessageX962SHA512))
        XCTAssertFalse(SecKeyIsAlgorithmSupported(key, .sign, .rsaSignatureMessagePKCS1v15SHA256))
        // Its attributes say what it is.
        let attributes = try XCTUnwrap(SecKeyCopyAttributes(key) as? [String: Any])
        XCTAssertEqual(attributes[kSecAttrTokenID as String] as? String, kSecAttrTokenIDSecureEnclave as String)
        XCTAssertEqual(attributes[kSecAttrKeyClass as String] as? Int, 1)
        XCTAssertEqual(attributes[kSecAttrIsExtractable as String] as? Bool, false)
        XCTAssertEqual(attributes[kSecValueData as String] as? Data, publicBytes)
    }

    func testAStoredEnclaveKeyIsFoundByItsTagAndReadsGiveOnlyItsPublicKey() throws {
        let key = try enclaveKey(privateExtra: [kSecAttrLabel as String: "device key"])
        let publicBytes = try XCTUnwrap(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(key)!, nil) as Data?)
        let (status, found) = find([kSecReturnRef as String: true])
        XCTAssertEqual(status, errSecSuccess)
        let stored = try XCTUnwrap(found as? SecKey)
        XCTAssertEqual(stored, key)
        let message = Data("signed by the stored key".utf8)
        let signature = try XCTUnwrap(sign(stored, message).0)
        XCTAssertTrue(verifies(key, message, signature, .ecdsaSignatureMessageX962SHA256))
        // Its data, asked for any way (with attributes, alone, by its whole primary key), is its public key.
        let (_, withAttributes) = find([kSecReturnAttributes as String: true, kSecReturnData as String: true])
        let dictionary = try XCTUnwrap(withAttributes as? [String: Any])
        XCTAssertEqual(dictionary[kSecValueData as String] as? Data, publicBytes)
        XCTAssertEqual(dictionary[kSecAttrTokenID as String] as? String, "com.apple.setoken")
        XCTAssertEqual(dictionary[kSecAttrLabel as String] as? String, "device key")
        XCTAssertEqual(dictionary[kSecAttrKeySizeInBits as String] as? Int, 256)
        let label = try XCTUnwrap(dictionary[kSecAttrApplicationLabel as String] as? Data)
        let zero = Date(timeIntervalSinceReferenceDate: 0)
        let (_, alone) = find([
            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecAttrApplicationLabel as String: label,
            kSecAttrCreator as String: 0, kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeySizeInBits as String: 256, kSecAttrEffectiveKeySize as String: 256, "sdat": zero, "edat": zero,
            kSecReturnData as String: true,
        ])
        XCTAssertEqual(alone as? Data, publicBytes)
        // The key's data and token are its own: an update changing them is refused, a label change is not.
        let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag]
        XCTAssertEqual(
            SecItemUpdate(query as CFDictionary, [kSecValueData as String: Data("forged".utf8)] as CFDictionary),
            errSecParam)
        XCTAssertEqual(
            SecItemUpdate(query as CFDictionary, [kSecAttrTokenID as String: "other"] as CFDictionary), errSecParam)
        XCTAssertEqual(
            SecItemUpdate(query as CFDictionary, [kSecAttrLabel as String: "renamed"] as CFDictionary), errSecSuccess)
        XCTAssertNil(sign(stored, message).1, "still the same key after the update")
        // It is already in the keychain: adding it again is a duplicate.
        XCTAssertEqual(
            SecItemAdd([kSecValueRef as String: key, kSecAttrLabel as String: "again"] as CFDictionary, nil),
            errSecDuplicateItem)
        // Deleted, it is gone for every SecKey that named it.
        XCTAssertEqual(SecItemDelete([kSecValueRef as String: key] as CFDictionary), errSecSuccess)
        XCTAssertEqual(sign(stored, message).1, Int(errSecItemNotFound))
        XCTAssertEqual(sign(key, message).1, Int(errSecItemNotFound))
    }

    func testKeyExchangeAndECIESAgreeWithSoftwareKeys() throws {
        let key = try enclaveKey()
        let enclavePublic = try XCTUnwrap(SecKeyCopyPublicKey(key))
        let peer = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256]
                    as CFDictionary, nil))
        let peerPublic = try XCTUnwrap(SecKeyCopyPublicKey(peer))
        for algorithm in [SecKeyAlgorithm.ecdhKeyExchangeStandard, .ecdhKeyExchangeCofactorX963SHA256] {
            let parameters: [String: Any] = [
                SecKeyKeyExchangeParameter.requestedSize.rawValue as String: 32,
                SecKeyKeyExchangeParameter.sharedInfo.rawValue as String: Data("info".utf8),
            ]
            var error: Unmanaged<CFError>?
            let ours = SecKeyCopyKeyExchangeResult(key, algorithm, peerPublic, parameters as CFDictionary, &error)
            XCTAssertNil(error)
            let theirs = SecKeyCopyKeyExchangeResult(peer, algorithm, enclavePublic, parameters as CFDictionary, nil)
            XCTAssertNotNil(ours)
            XCTAssertEqual(ours as Data?, theirs as Data?, "\(algorithm.rawValue)")
        }
        // A peer on another curve is refused.
        let other = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 384]
                    as CFDictionary, nil))
        var error: Unmanaged<CFError>?
        XCTAssertNil(
            SecKeyCopyKeyExchangeResult(
                key, .ecdhKeyExchangeStandard, SecKeyCopyPublicKey(other)!, [:] as CFDictionary, &error))
        XCTAssertEqual(error.map { CFErrorGetCode($0.takeRetainedValue()) }, Int(errSecParam))
        // ECIES to the enclave key, opened by it.
        let plaintext = Data("for the device only".utf8)
        for algorithm in [
            SecKeyAlgorithm.eciesEncryptionStandardX963SHA256AESGCM, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
        ] {
            let sealed = try XCTUnwrap(SecKeyCreateEncryptedData(enclavePublic, algorithm, plaintext as CFData, nil))
            XCTAssertEqual(SecKeyCreateDecryptedData(key, algorithm, sealed, nil) as Data?, plaintext)
            var tampered = sealed as Data
            tampered[tampered.count - 1] ^= 1
            var failure: Unmanaged<CFError>?
            XCTAssertNil(SecKeyCreateDecryptedData(key, algorithm, tampered as CFData, &failure))
            XCTAssertEqual(failure.map { CFErrorGetCode($0.takeRetainedValue()) }, Int(errSecParam))
        }
    }

    // MARK: Access control

    func testPrivateKeyUsageAsksTheUserToSignButNotToFindTheKey() throws {
        _ = try service.biometry(.enroll)
        var error: Unmanaged<CFError>?
        let accessControl = try XCTUnwrap(
            SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .biometryAny], &error))
        let key = try enclaveKey(privateExtra: [kSecAttrAccessControl as String: accessControl])
        // Finding the key, and reading its public key, asks nobody.
        let (status, found) = find([kSecReturnRef as String: true, kSecUseOperationPrompt as String: "Sign in"])
        XCTAssertEqual(status, errSecSuccess)
        let stored = try XCTUnwrap(found as? SecKey)
        XCTAssertEqual(try service.biometry(.status).pendingAnswers, [])
        let message = Data("approved".utf8)
        _ = try service.biometry(.answer(.match))
        let signature = try XCTUnwrap(sign(stored, message).0)
        XCTAssertTrue(verifies(key, message, signature, .ecdsaSignatureMessageX962SHA256))
        XCTAssertEqual(try service.biometry(.status).pendingAnswers, [], "the signature asked once")
        _ = try service.biometry(.answer(.nomatch))
        XCTAssertEqual(sign(stored, message).1, Int(errSecAuthFailed))
        _ = try service.biometry(.answer(.cancel))
        XCTAssertEqual(sign(key, message).1, Int(errSecUserCanceled))
        // A context that must not ask makes the key refuse rather than prompt.
        let context = LAContext()
        context.interactionNotAllowed = true
        let (_, quiet) = find([kSecReturnRef as String: true, kSecUseAuthenticationContext as String: context])
        XCTAssertEqual(sign(try XCTUnwrap(quiet as? SecKey), message).1, Int(errSecInteractionNotAllowed))
        // A key found with kSecUseAuthenticationUISkip (which leaves out what would ask) still asks to sign.
        let (_, skipping) = find([
            kSecReturnRef as String: true, kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
        ])
        _ = try service.biometry(.answer(.match))
        XCTAssertNil(sign(try XCTUnwrap(skipping as? SecKey), message).1)
        // An update the key cannot take is refused before anybody is asked; one it can take asks, as
        // any guarded item's update does (it re-seals the key).
        _ = try service.biometry(.answer(.match))
        let byTag: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag]
        XCTAssertEqual(
            SecItemUpdate(byTag as CFDictionary, [kSecAttrIsExtractable as String: true] as CFDictionary), errSecParam)
        XCTAssertEqual(try service.biometry(.status).pendingAnswers, [.match], "nobody was asked")
        XCTAssertEqual(
            SecItemUpdate(byTag as CFDictionary, [kSecAttrLabel as String: "renamed"] as CFDictionary), errSecSuccess)
        XCTAssertEqual(try service.biometry(.status).pendingAnswers, [])
        // Key exchange is guarded the same way.
        let peer = SecKeyCreateRandomKey(
            [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256]
                as CFDictionary, nil)!
        _ = try service.biometry(.answer(.nomatch))
        var exchangeError: Unmanaged<CFError>?
        XCTAssertNil(
            SecKeyCopyKeyExchangeResult(
                stored, .ecdhKeyExchangeStandard, SecKeyCopyPublicKey(peer)!, [:] as CFDictionary, &exchangeError))
        XCTAssertEqual(exchangeError.map { CFErrorGetCode($0.takeRetainedValue()) }, Int(errSecAuthFailed))
    }

    func testALockedKeychainSignsNothingWithAKeyThatNeedsItUnlocked() throws {
        let passcode = SecureBytes(copying: Array("2468".utf8))
        try service.setPasscode(passcode, current: nil)
        let accessControl = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil)!
        let key = try enclaveKey(privateExtra: [kSecAttrAccessControl as String: accessControl])
        XCTAssertNil(sign(key, Data("unlocked".utf8)).1)
        try service.lock()
        XCTAssertEqual(sign(key, Data("locked".utf8)).1, Int(errSecInteractionNotAllowed))
        try service.unlock(passcode: passcode)
        XCTAssertNil(sign(key, Data("unlocked again".utf8)).1)
    }

    func testAnotherAppsKeyCannotBeUsed() throws {
        let key = try enclaveKey()
        keychain.setAccessGroups(["TEAM.com.example.other"])
        XCTAssertEqual(sign(key, Data("not mine".utf8)).1, Int(errSecItemNotFound))
        XCTAssertEqual(find([kSecReturnRef as String: true]).0, errSecItemNotFound)
    }

    // MARK: Ephemeral keys

    func testAnEphemeralKeySignsStoresNothingAndCanBeStoredLater() throws {
        let key = try enclaveKey(privateExtra: [kSecAttrIsPermanent as String: false])
        XCTAssertEqual(find([:]).0, errSecItemNotFound, "nothing was stored")
        let attributes = try XCTUnwrap(SecKeyCopyAttributes(key) as? [String: Any])
        XCTAssertEqual(attributes[kSecAttrIsPermanent as String] as? Bool, false)
        XCTAssertEqual(attributes[kSecAttrTokenID as String] as? String, kSecAttrTokenIDSecureEnclave as String)
        XCTAssertNil(SecKeyCopyExternalRepresentation(key, nil))
        let message = Data("signed by a key no item holds".utf8)
        let signature = try XCTUnwrap(sign(key, message).0)
        XCTAssertTrue(verifies(key, message, signature, .ecdsaSignatureMessageX962SHA256))
        let plaintext = Data("sealed to it".utf8)
        let sealed = try XCTUnwrap(
            SecKeyCreateEncryptedData(
                SecKeyCopyPublicKey(key)!, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, plaintext as CFData,
                nil))
        XCTAssertEqual(
            SecKeyCreateDecryptedData(key, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, sealed, nil) as Data?,
            plaintext)
        // Stored later by kSecValueRef, it is found as a stored enclave key; both sign.
        XCTAssertEqual(
            SecItemAdd([kSecValueRef as String: key, kSecAttrApplicationTag as String: tag] as CFDictionary, nil),
            errSecSuccess)
        XCTAssertEqual(
            SecItemAdd([kSecValueRef as String: key, kSecAttrApplicationTag as String: tag] as CFDictionary, nil),
            errSecDuplicateItem)
        let (status, found) = find([kSecReturnRef as String: true])
        XCTAssertEqual(status, errSecSuccess)
        let stored = try XCTUnwrap(found as? SecKey)
        XCTAssertEqual(stored, key)
        XCTAssertEqual((SecKeyCopyAttributes(stored) as? [String: Any])?[kSecAttrIsPermanent as String] as? Bool, true)
        XCTAssertTrue(verifies(key, message, try XCTUnwrap(sign(stored, message).0), .ecdsaSignatureMessageX962SHA256))
        XCTAssertNil(sign(key, message).1)
        // It cannot be stored under another access control than it was made with.
        let other = try enclaveKey(privateExtra: [kSecAttrIsPermanent as String: false])
        let accessControl = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .biometryAny], nil)!
        XCTAssertEqual(
            SecItemAdd(
                [kSecValueRef as String: other, kSecAttrAccessControl as String: accessControl] as CFDictionary, nil),
            errSecParam)
    }

    func testAnEphemeralKeysAccessControlAndProtectionHoldForEveryUse() throws {
        _ = try service.biometry(.enroll)
        let accessControl = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .biometryCurrentSet], nil)!
        let key = try enclaveKey(privateExtra: [
            kSecAttrIsPermanent as String: false, kSecAttrAccessControl as String: accessControl,
        ])
        let message = Data("approved".utf8)
        _ = try service.biometry(.answer(.match))
        XCTAssertNil(sign(key, message).1)
        _ = try service.biometry(.answer(.nomatch))
        XCTAssertEqual(sign(key, message).1, Int(errSecAuthFailed))
        _ = try service.biometry(.answer(.cancel))
        XCTAssertEqual(sign(key, message).1, Int(errSecUserCanceled))
        // Locked, it signs nothing, and asks nobody.
        let passcode = SecureBytes(copying: Array("2468".utf8))
        try service.setPasscode(passcode, current: nil)
        try service.lock()
        _ = try service.biometry(.answer(.match))
        XCTAssertEqual(sign(key, message).1, Int(errSecInteractionNotAllowed))
        XCTAssertEqual(try service.biometry(.status).pendingAnswers, [.match])
        try service.unlock(passcode: passcode)
        XCTAssertNil(sign(key, message).1)
        // A new enrollment ends a key bound to the enrolled set, and it cannot be stored afterwards.
        _ = try service.biometry(.enroll)
        _ = try service.biometry(.answer(.match))
        XCTAssertEqual(sign(key, message).1, Int(errSecItemNotFound))
        XCTAssertEqual(try service.biometry(.status).pendingAnswers, [.match], "nobody was asked for a dead key")
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: key] as CFDictionary, nil), errSecItemNotFound)
        // A key offering the enrolled set as one alternative is not stored under a set enrolled later.
        let offered = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
            [.privateKeyUsage, .biometryCurrentSet, .or, .devicePasscode],
            nil)!
        let alternative = try enclaveKey(privateExtra: [
            kSecAttrIsPermanent as String: false, kSecAttrAccessControl as String: offered,
        ])
        XCTAssertNil(sign(alternative, message).1, "the pending match answers it")
        _ = try service.biometry(.enroll)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: alternative] as CFDictionary, nil), errSecAuthFailed)
        // A key that needs a passcode set dies with the passcode, and stays dead under a new one.
        let passcodeBound = try enclaveKey(privateExtra: [
            kSecAttrIsPermanent as String: false,
            kSecAttrAccessible as String: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
        ])
        XCTAssertNil(sign(passcodeBound, message).1)
        try service.removePasscode(current: passcode)
        XCTAssertEqual(sign(passcodeBound, message).1, Int(errSecItemNotFound))
        try service.setPasscode(passcode, current: nil)
        XCTAssertEqual(sign(passcodeBound, message).1, Int(errSecItemNotFound))
        // An application password cannot guard an ephemeral key.
        let withPassword = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .applicationPassword], nil)!
        let context = LAContext()
        _ = context.setCredential(Data("pw".utf8), type: .applicationPassword)
        XCTAssertEqual(
            creationStatus(
                parameters(
                    [kSecUseAuthenticationContext as String: context],
                    privateExtra: [
                        kSecAttrIsPermanent as String: false, kSecAttrAccessControl as String: withPassword,
                    ])), Int(errSecUnimplemented))
    }

    // MARK: Identities

    /// Runs the openssl command in `directory`.
    private func openssl(_ arguments: [String], in directory: String) throws {
        let (status, _) = try OpenSSLCommand.run(arguments, in: directory)
        XCTAssertEqual(status, 0, "openssl \(arguments.joined(separator: " "))")
    }

    func testACertificateForAnEnclaveKeyMakesAnIdentityThatSigns() throws {
        let work = keychain.directory + "-openssl"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let key = try enclaveKey()
        let point = try XCTUnwrap(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(key)!, nil) as Data?)
        // The public key as SubjectPublicKeyInfo (id-ecPublicKey, prime256v1), for openssl to certify.
        let prefix: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
            0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
        ]
        try (Data(prefix) + point).write(to: URL(fileURLWithPath: work + "/enclave.der"))
        try openssl(["pkey", "-pubin", "-inform", "DER", "-in", "enclave.der", "-out", "enclave.pem"], in: work)
        try openssl(
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
                "-out", "ca.pem", "-days", "30", "-subj", "/CN=Example Device CA",
            ], in: work)
        try openssl(
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "stand-in.key",
                "-out", "device.csr", "-subj", "/CN=device.example.com",
            ], in: work)
        try openssl(
            [
                "x509", "-req", "-in", "device.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-force_pubkey",
                "enclave.pem", "-days", "30", "-outform", "DER", "-out", "device.der",
            ], in: work)
        let der = try Data(contentsOf: URL(fileURLWithPath: work + "/device.der"))
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
        XCTAssertEqual(SecCertificateCopyKey(certificate), SecKeyCopyPublicKey(key))
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil), errSecSuccess)
        // The certificate pairs with the enclave key: an identity whose private key signs in the keychain.
        var result: CFTypeRef?
        let query: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        let identity = try XCTUnwrap(result as? SecIdentity)
        var privateKey: SecKey?
        XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &privateKey), errSecSuccess)
        let signer = try XCTUnwrap(privateKey)
        XCTAssertEqual(signer, key)
        XCTAssertNil(SecKeyCopyExternalRepresentation(signer, nil))
        let message = Data("a TLS handshake, say".utf8)
        let signature = try XCTUnwrap(sign(signer, message).0)
        XCTAssertTrue(
            SecKeyVerifySignature(
                SecCertificateCopyKey(certificate)!, .ecdsaSignatureMessageX962SHA256, message as CFData,
                signature as CFData, nil))
        // Its certificate deleted, the identity can be added again: the key is already its item.
        XCTAssertEqual(SecItemDelete([kSecValueRef as String: certificate] as CFDictionary), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecItemNotFound)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        // Deleting the identity deletes the key with its certificate.
        XCTAssertEqual(SecItemDelete([kSecValueRef as String: identity] as CFDictionary), errSecSuccess)
        XCTAssertEqual(sign(key, message).1, Int(errSecItemNotFound))
    }

    // MARK: Bad input

    func testEverythingAnEnclaveKeyCannotBeIsRefused() {
        let ec = kSecAttrKeyTypeECSECPrimeRandom
        XCTAssertEqual(
            creationStatus(
                parameters([kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048])),
            Int(errSecParam))
        XCTAssertEqual(creationStatus(parameters([kSecAttrKeySizeInBits as String: 384])), Int(errSecParam))
        XCTAssertEqual(
            creationStatus(
                parameters([kSecAttrKeyType as String: ec, kSecAttrTokenID as String: "com.example.token"])),
            Int(errSecParam))
        XCTAssertEqual(
            creationStatus(parameters(privateExtra: [kSecAttrSynchronizable as String: true])), Int(errSecParam))
        let withoutKeyUsage = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .userPresence, nil)!
        XCTAssertEqual(
            creationStatus(parameters(privateExtra: [kSecAttrAccessControl as String: withoutKeyUsage])),
            Int(errSecParam))
        // A token item is never added from outside, with any data.
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass as String: kSecClassKey, kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                    kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecAttrKeyType as String: ec,
                    kSecValueData as String: Data(repeating: 1, count: 80),
                ] as CFDictionary, nil), errSecParam)
        // Nothing was stored by any of these.
        XCTAssertEqual(find([:]).0, errSecItemNotFound)
    }

    func testThePublicKeyCanBeStoredBesideIt() throws {
        var parameters = parameters()
        parameters[kSecPublicKeyAttrs as String] = [
            kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: Data("public".utf8),
        ]
        let key = try XCTUnwrap(SecKeyCreateRandomKey(parameters as CFDictionary, nil))
        let (status, found) = find([
            kSecAttrApplicationTag as String: Data("public".utf8), kSecReturnRef as String: true,
        ])
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(found as? SecKey, SecKeyCopyPublicKey(key))
        let attributes = try XCTUnwrap(SecKeyCopyAttributes(found as! SecKey) as? [String: Any])
        XCTAssertNil(attributes[kSecAttrTokenID as String], "the public key is an ordinary key")
    }
}
