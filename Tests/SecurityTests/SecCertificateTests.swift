import Foundation
import KeychainCore
import KeychainCrypto
import KeychainEngine
import Security
import XCTest

/// `SecCertificate` against certificates the `openssl` command makes: a CA and leaf certificates, read
/// back as `openssl x509` reads them; malformed and mutated DER refused without a crash.
final class SecCertificateTests: KeychainTestCase {
    private var work: String!

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            throw XCTSkip("needs the openssl command (Debian's openssl package)")
        }
        work = NSTemporaryDirectory() + "seccert-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    }

    override func tearDown() {
        if let work { try? FileManager.default.removeItem(atPath: work) }
        super.tearDown()
    }

    @discardableResult
    private func openssl(_ arguments: [String]) throws -> String {
        let (status, output) = try OpenSSLCommand.run(arguments, in: work)
        XCTAssertEqual(status, 0, "openssl \(arguments.joined(separator: " "))")
        return String(decoding: output, as: UTF8.self)
    }

    private func der(_ name: String) throws -> Data {
        try openssl(["x509", "-in", name + ".pem", "-outform", "DER", "-out", name + ".der"])
        return try Data(contentsOf: URL(fileURLWithPath: work + "/" + name + ".der"))
    }

    /// A CA, and a leaf it signs with an email in its subject and in its alternative names.
    private func makeCertificates() throws -> (ca: SecCertificate, leaf: SecCertificate) {
        try openssl([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "30",
            "-subj", "/O=Example Corp/CN=Example Root CA",
        ])
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "leaf.key", "-out",
            "leaf.csr", "-subj", "/O=Example Corp/OU=Apps/CN=app.example.com/emailAddress=ops@example.com",
        ])
        try "subjectAltName=email:alt@example.com,DNS:app.example.com\nsubjectKeyIdentifier=hash\n".write(
            toFile: work + "/ext.cnf", atomically: true, encoding: .utf8)
        try openssl([
            "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "0x8a1b2c3d4e",
            "-days", "30", "-extfile", "ext.cnf", "-out", "leaf.pem",
        ])
        let ca = try XCTUnwrap(SecCertificateCreateWithData(nil, try der("ca") as CFData))
        let leaf = try XCTUnwrap(SecCertificateCreateWithData(nil, try der("leaf") as CFData))
        return (ca, leaf)
    }

    func testCertificatesReadAsOpenSSLReadsThem() throws {
        let (ca, leaf) = try makeCertificates()
        XCTAssertEqual(CFGetTypeID(leaf), SecCertificateGetTypeID())
        XCTAssertEqual(SecCertificateCopyData(leaf) as Data, try der("leaf"))
        XCTAssertEqual(SecCertificateCopySubjectSummary(leaf) as String?, "app.example.com")
        XCTAssertEqual(SecCertificateCopySubjectSummary(ca) as String?, "Example Root CA")
        var name: CFString?
        XCTAssertEqual(SecCertificateCopyCommonName(leaf, &name), errSecSuccess)
        XCTAssertEqual(name as String?, "app.example.com")
        var emails: CFArray?
        XCTAssertEqual(SecCertificateCopyEmailAddresses(leaf, &emails), errSecSuccess)
        XCTAssertEqual(emails as? [String], ["ops@example.com", "alt@example.com"])
        // The serial as openssl prints it.
        let serial = try XCTUnwrap(SecCertificateCopySerialNumberData(leaf, nil) as Data?)
        let printed = try openssl(["x509", "-in", "leaf.pem", "-noout", "-serial"])
        // openssl prints the number; the data keeps the DER INTEGER's leading zero.
        XCTAssertEqual(
            "serial=" + serial.drop { $0 == 0 }.map { String(format: "%02X", $0) }.joined(),
            printed.trimmingCharacters(in: .newlines))
        XCTAssertEqual(serial, Data([0x00, 0x8a, 0x1b, 0x2c, 0x3d, 0x4e]), "a positive INTEGER keeps its leading zero")
        // The leaf's issuer is the CA's subject.
        XCTAssertEqual(
            SecCertificateCopyNormalizedIssuerSequence(leaf) as Data?,
            SecCertificateCopyNormalizedSubjectSequence(ca) as Data?)
        // The key: the leaf's EC public key verifies what its private key signed.
        let key = try XCTUnwrap(SecCertificateCopyKey(leaf))
        XCTAssertEqual((SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrKeySizeInBits as String] as? Int, 256)
        try Data("to sign".utf8).write(to: URL(fileURLWithPath: work + "/m"))
        try openssl(["dgst", "-sha256", "-sign", "leaf.key", "-out", "m.sig", "m"])
        let signature = try Data(contentsOf: URL(fileURLWithPath: work + "/m.sig"))
        XCTAssertTrue(
            SecKeyVerifySignature(
                key, .ecdsaSignatureMessageX962SHA256, Data("to sign".utf8) as CFData, signature as CFData, nil))
        let caKey = try XCTUnwrap(SecCertificateCopyKey(ca))
        XCTAssertEqual(SecKeyGetBlockSize(caKey), 256)
        // Equal when the DER is.
        XCTAssertEqual(SecCertificateCreateWithData(nil, try der("leaf") as CFData), leaf)
        XCTAssertNotEqual(ca, leaf)
    }

    /// A root (RSA), an intermediate (P-384) it signs and a leaf (P-256) the intermediate signs: each
    /// certificate's accessors and keychain attributes agree with what `openssl x509` prints of it,
    /// and each one's issuer is the one above's subject.
    func testAChainOfRootIntermediateAndLeafReadsAsOpenSSLReadsIt() throws {
        try
            "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
            .write(toFile: work + "/ca.cnf", atomically: true, encoding: .utf8)
        try "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\nsubjectAltName=DNS:chain.example.com\n".write(
            toFile: work + "/leaf.cnf", atomically: true, encoding: .utf8)
        try openssl([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "root.key", "-out", "root.pem", "-days", "30",
            "-subj", "/C=NL/O=Chain Corp/CN=Chain Root",
        ])
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-nodes", "-keyout", "mid.key", "-out",
            "mid.csr", "-subj", "/O=Chain Corp/OU=Issuing/CN=Chain Intermediate",
        ])
        try openssl([
            "x509", "-req", "-in", "mid.csr", "-CA", "root.pem", "-CAkey", "root.key", "-set_serial", "4096",
            "-days", "30", "-extfile", "ca.cnf", "-out", "mid.pem",
        ])
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "end.key", "-out",
            "end.csr", "-subj", "/O=Chain Corp/CN=chain.example.com",
        ])
        try openssl([
            "x509", "-req", "-in", "end.csr", "-CA", "mid.pem", "-CAkey", "mid.key", "-set_serial", "0x7fff0001",
            "-days", "30", "-extfile", "leaf.cnf", "-out", "end.pem",
        ])
        var chain: [(name: String, certificate: SecCertificate, attributes: [String: Any])] = []
        for (name, commonName, bits) in [
            ("root", "Chain Root", 2048), ("mid", "Chain Intermediate", 384), ("end", "chain.example.com", 256),
        ] {
            let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, try der(name) as CFData), name)
            // What openssl prints: the serial, the subject's common name, the subject key identifier.
            let serial = try openssl(["x509", "-in", name + ".pem", "-noout", "-serial"])
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let serialData = try XCTUnwrap(SecCertificateCopySerialNumberData(certificate, nil) as Data?)
            XCTAssertEqual(
                "serial=" + serialData.drop { $0 == 0 }.map { String(format: "%02X", $0) }.joined(), serial, name)
            var common: CFString?
            XCTAssertEqual(SecCertificateCopyCommonName(certificate, &common), errSecSuccess)
            XCTAssertEqual(common as String?, commonName)
            let subject = try openssl(["x509", "-in", name + ".pem", "-noout", "-subject", "-nameopt", "RFC2253"])
            XCTAssertTrue(subject.contains("CN=\(commonName)"), subject)
            XCTAssertEqual(SecCertificateCopySubjectSummary(certificate) as String?, commonName)
            let key = try XCTUnwrap(SecCertificateCopyKey(certificate), name)
            XCTAssertEqual(
                (SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrKeySizeInBits as String] as? Int, bits, name)
            // The key openssl extracts is the key read here.
            try openssl(["x509", "-in", name + ".pem", "-noout", "-pubkey", "-out", name + ".pub"])
            try openssl(["pkey", "-pubin", "-in", name + ".pub", "-outform", "DER", "-out", name + ".spki"])
            let spki = try Data(contentsOf: URL(fileURLWithPath: work + "/" + name + ".spki"))
            let external = try XCTUnwrap(SecKeyCopyExternalRepresentation(key, nil) as Data?)
            XCTAssertTrue(spki.suffix(external.count) == external, "\(name): the certificate's key")
            XCTAssertEqual(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil), errSecSuccess)
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassCertificate, kSecValueRef as String: certificate,
                kSecReturnAttributes as String: true,
            ]
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
            let attributes = try XCTUnwrap(result as? [String: Any])
            XCTAssertEqual(attributes[kSecAttrCertificateType as String] as? Int, 3, name)
            XCTAssertEqual(attributes[kSecAttrCertificateEncoding as String] as? Int, 3, name)
            XCTAssertEqual(attributes[kSecAttrAccessible as String] as? String, kSecAttrAccessibleAlways as String)
            XCTAssertEqual(attributes[kSecAttrLabel as String] as? String, commonName)
            XCTAssertEqual(attributes[kSecAttrSerialNumber as String] as? Data, serialData)
            XCTAssertEqual(
                attributes[kSecAttrPublicKeyHash as String] as? Data,
                (SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrApplicationLabel as String] as? Data)
            // Every one of them has a subject key identifier (req -x509 adds one to the root).
            let printed = try openssl(["x509", "-in", name + ".pem", "-noout", "-ext", "subjectKeyIdentifier"])
            let hex = printed.split(separator: "\n").last.map {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: ":", with: "")
            }
            let identifier = try XCTUnwrap(attributes[kSecAttrSubjectKeyID as String] as? Data, name)
            XCTAssertEqual(identifier.map { String(format: "%02X", $0) }.joined(), hex, name)
            chain.append((name, certificate, attributes))
        }
        // Each issuer is the subject above it; the root issued itself.
        XCTAssertEqual(
            chain[0].attributes[kSecAttrIssuer as String] as? Data,
            chain[0].attributes[kSecAttrSubject as String] as? Data)
        for (upper, lower) in zip(chain, chain.dropFirst()) {
            XCTAssertEqual(
                lower.attributes[kSecAttrIssuer as String] as? Data,
                upper.attributes[kSecAttrSubject as String] as? Data,
                "\(lower.name) is issued by \(upper.name)")
            XCTAssertEqual(
                SecCertificateCopyNormalizedIssuerSequence(lower.certificate) as Data?,
                SecCertificateCopyNormalizedSubjectSequence(upper.certificate) as Data?)
        }
        // openssl itself accepts the chain these are.
        try openssl(["verify", "-CAfile", "root.pem", "-untrusted", "mid.pem", "end.pem"])
    }

    func testMalformedAndMutatedDERIsRefusedWithoutACrash() throws {
        let (_, leaf) = try makeCertificates()
        let der = SecCertificateCopyData(leaf) as Data
        XCTAssertNil(SecCertificateCreateWithData(nil, Data() as CFData))
        XCTAssertNil(SecCertificateCreateWithData(nil, Data("not a certificate".utf8) as CFData))
        XCTAssertNil(SecCertificateCreateWithData(nil, der.dropLast() as CFData), "truncated")
        XCTAssertNil(SecCertificateCreateWithData(nil, (der + Data([0])) as CFData), "bytes after it")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3_000 {
            var bytes = der
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: bytes = bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator))
            case 1:
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(
                        in: 0...255, using: &generator)
                }
            default:
                bytes = Data((0..<Int.random(in: 0...400, using: &generator)).map { _ in UInt8.random(in: 0...255) })
            }
            // Whatever parses is read through every accessor without a crash.
            if let certificate = SecCertificateCreateWithData(nil, bytes as CFData) {
                _ = SecCertificateCopySubjectSummary(certificate)
                _ = SecCertificateCopyKey(certificate)
                _ = SecCertificateCopySerialNumberData(certificate, nil)
                var emails: CFArray?
                _ = SecCertificateCopyEmailAddresses(certificate, &emails)
            }
        }
    }

    func testACertificateInTheKeychainCarriesApplesAttributes() throws {
        let (_, leaf) = try makeCertificates()
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: leaf] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: leaf] as CFDictionary, nil), errSecDuplicateItem)
        var result: CFTypeRef?
        let query: [String: Any] = [
            kSecClass as String: kSecClassCertificate, kSecReturnRef as String: true,
            kSecReturnAttributes as String: true,
        ]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        let attributes = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(attributes[kSecValueRef as String] as? SecCertificate, leaf)
        XCTAssertEqual(attributes[kSecAttrCertificateType as String] as? Int, 3)
        XCTAssertEqual(attributes[kSecAttrCertificateEncoding as String] as? Int, 3)
        XCTAssertEqual(attributes[kSecAttrLabel as String] as? String, "app.example.com")
        XCTAssertEqual(
            attributes[kSecAttrSubject as String] as? Data, SecCertificateCopyNormalizedSubjectSequence(leaf) as Data?)
        XCTAssertEqual(
            attributes[kSecAttrSerialNumber as String] as? Data, SecCertificateCopySerialNumberData(leaf, nil) as Data?)
        // pkhh is the SHA-1 of the public key: the klbl its private key has in the keychain.
        let key = try XCTUnwrap(SecCertificateCopyKey(leaf))
        XCTAssertEqual(
            attributes[kSecAttrPublicKeyHash as String] as? Data,
            (SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrApplicationLabel as String] as? Data)
        // Found by its serial number and issuer, as Apple's certificate primary key names it.
        let byIssuer: [String: Any] = [
            kSecClass as String: kSecClassCertificate, kSecAttrIssuer as String: attributes[kSecAttrIssuer as String]!,
            kSecAttrSerialNumber as String: attributes[kSecAttrSerialNumber as String]!, kSecReturnRef as String: true,
        ]
        XCTAssertEqual(SecItemCopyMatching(byIssuer as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? SecCertificate, leaf)
    }

    func testPKCS12ImportGivesAnIdentityThatTheKeychainPairsAgain() throws {
        let (ca, leaf) = try makeCertificates()
        try openssl([
            "pkcs12", "-export", "-inkey", "leaf.key", "-in", "leaf.pem", "-certfile", "ca.pem", "-passout",
            "pass:open sesame", "-name", "app identity", "-out", "id.p12",
        ])
        let p12 = try Data(contentsOf: URL(fileURLWithPath: work + "/id.p12"))
        var items: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "wrong"] as CFDictionary, &items),
            errSecAuthFailed)
        XCTAssertEqual(
            SecPKCS12Import(Data("no p12".utf8) as CFData, [:] as CFDictionary, &items), errSecDecode)
        // RC2/3DES (openssl's -legacy): the right password opens its MAC, and then the contents cannot be
        // decrypted by this build: errSecUnimplemented, not a wrong password.
        try openssl([
            "pkcs12", "-export", "-legacy", "-inkey", "leaf.key", "-in", "leaf.pem", "-passout", "pass:open sesame",
            "-out", "legacy.p12",
        ])
        let legacy = try Data(contentsOf: URL(fileURLWithPath: work + "/legacy.p12"))
        XCTAssertEqual(
            SecPKCS12Import(legacy as CFData, [kSecImportExportPassphrase as String: "wrong"] as CFDictionary, &items),
            errSecAuthFailed)
        let legacyStatus = SecPKCS12Import(
            legacy as CFData, [kSecImportExportPassphrase as String: "open sesame"] as CFDictionary, &items)
        XCTAssertTrue([errSecSuccess, errSecUnimplemented].contains(legacyStatus), "\(legacyStatus)")
        XCTAssertEqual(
            SecPKCS12Import(
                p12 as CFData, [kSecImportExportPassphrase as String: "open sesame"] as CFDictionary, &items),
            errSecSuccess)
        let item = try XCTUnwrap((items as? [[String: Any]])?.first)
        let identity = try XCTUnwrap(item[kSecImportItemIdentity as String] as? SecIdentity)
        XCTAssertEqual(item[kSecImportItemLabel as String] as? String, "app identity")
        XCTAssertEqual(item[kSecImportItemCertChain as String] as? [SecCertificate], [leaf, ca])
        var certificate: SecCertificate?
        var key: SecKey?
        XCTAssertEqual(SecIdentityCopyCertificate(identity, &certificate), errSecSuccess)
        XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &key), errSecSuccess)
        XCTAssertEqual(certificate, leaf)
        let message = Data("signed with the identity".utf8) as CFData
        let signature = try XCTUnwrap(
            SecKeyCreateSignature(try XCTUnwrap(key), .ecdsaSignatureMessageX962SHA256, message, nil))
        XCTAssertTrue(
            SecKeyVerifySignature(
                SecCertificateCopyKey(leaf)!, .ecdsaSignatureMessageX962SHA256, message, signature, nil))

        // In the keychain: the certificate and the key are stored; an identity query pairs them again.
        var result: CFTypeRef?
        let query: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecItemNotFound)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? SecIdentity, identity)
        // A certificate without its key is no identity.
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: ca] as CFDictionary, nil), errSecSuccess)
        let all: [String: Any] = [
            kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true,
            kSecMatchLimit as String: kSecMatchLimitAll,
        ]
        XCTAssertEqual(SecItemCopyMatching(all as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual((result as? [SecIdentity])?.count, 1)
    }

    /// The leaf's identity, opened from a PKCS#12 file the openssl command makes.
    private func leafIdentity() throws -> (identity: SecIdentity, ca: SecCertificate, leaf: SecCertificate) {
        let (ca, leaf) = try makeCertificates()
        try openssl([
            "pkcs12", "-export", "-inkey", "leaf.key", "-in", "leaf.pem", "-passout", "pass:pw", "-out", "leaf.p12",
        ])
        let p12 = try Data(contentsOf: URL(fileURLWithPath: work + "/leaf.p12"))
        var items: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "pw"] as CFDictionary, &items),
            errSecSuccess)
        let item = try XCTUnwrap((items as? [[String: Any]])?.first)
        return (try XCTUnwrap(item[kSecImportItemIdentity as String] as? SecIdentity), ca, leaf)
    }

    func testACertificateIsFoundUpdatedAndDeletedByItsReference() throws {
        let (ca, leaf) = try makeCertificates()
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: ca] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: leaf] as CFDictionary, nil), errSecSuccess)
        var result: CFTypeRef?
        let byLeaf: [String: Any] = [kSecValueRef as String: leaf, kSecReturnAttributes as String: true]
        XCTAssertEqual(SecItemCopyMatching(byLeaf as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual((result as? [String: Any])?[kSecAttrLabel as String] as? String, "app.example.com")
        XCTAssertEqual(
            SecItemUpdate(
                [kSecValueRef as String: leaf] as CFDictionary, [kSecAttrLabel as String: "renamed"] as CFDictionary),
            errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(byLeaf as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual((result as? [String: Any])?[kSecAttrLabel as String] as? String, "renamed")
        // A certificate names a certificate item: with another class it is a bad query.
        let wrongClass: [String: Any] = [kSecClass as String: kSecClassKey, kSecValueRef as String: leaf]
        XCTAssertEqual(SecItemCopyMatching(wrongClass as CFDictionary, &result), errSecParam)
        // Deleting the leaf by its reference leaves the CA.
        XCTAssertEqual(SecItemDelete([kSecValueRef as String: leaf] as CFDictionary), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(byLeaf as CFDictionary, &result), errSecItemNotFound)
        XCTAssertEqual(SecItemDelete([kSecValueRef as String: leaf] as CFDictionary), errSecItemNotFound)
        let all: [String: Any] = [
            kSecClass as String: kSecClassCertificate, kSecReturnRef as String: true,
            kSecMatchLimit as String: kSecMatchLimitAll,
        ]
        XCTAssertEqual(SecItemCopyMatching(all as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? [SecCertificate], [ca])
    }

    func testIdentitiesAreQueriedByEitherHalfAndDeletedWhole() throws {
        let (identity, ca, leaf) = try leafIdentity()
        var key: SecKey?
        XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &key), errSecSuccess)
        // The key stored with a tag, the certificates on their own: together they make one identity.
        let tag = Data("com.example.identity".utf8)
        XCTAssertEqual(
            SecItemAdd(
                [kSecValueRef as String: try XCTUnwrap(key), kSecAttrApplicationTag as String: tag] as CFDictionary,
                nil),
            errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: leaf] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: ca] as CFDictionary, nil), errSecSuccess)
        var result: CFTypeRef?
        func identities(_ terms: [String: Any]) -> (OSStatus, [SecIdentity]) {
            var query = terms
            query[kSecClass as String] = kSecClassIdentity
            query[kSecReturnRef as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitAll
            var found: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &found)
            return (status, found as? [SecIdentity] ?? [])
        }
        // A key attribute constrains the key, a certificate attribute the certificate.
        XCTAssertEqual(identities([kSecAttrApplicationTag as String: tag]).1, [identity])
        XCTAssertEqual(identities([kSecAttrApplicationTag as String: Data("other".utf8)]).0, errSecItemNotFound)
        XCTAssertEqual(identities([kSecAttrLabel as String: "app.example.com"]).1, [identity])
        XCTAssertEqual(identities([kSecAttrLabel as String: "Example Root CA"]).0, errSecItemNotFound)
        XCTAssertEqual(identities([kSecAttrKeyType as String: kSecAttrKeyTypeRSA]).0, errSecItemNotFound)
        XCTAssertEqual(identities([kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom]).1, [identity])
        // Attributes are the certificate's, with the identity beside them when asked.
        let withAttributes: [String: Any] = [
            kSecClass as String: kSecClassIdentity, kSecAttrApplicationTag as String: tag,
            kSecReturnAttributes as String: true, kSecReturnRef as String: true,
        ]
        XCTAssertEqual(SecItemCopyMatching(withAttributes as CFDictionary, &result), errSecSuccess)
        let attributes = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(attributes[kSecClass as String] as? String, kSecClassIdentity as String)
        XCTAssertEqual(attributes[kSecAttrLabel as String] as? String, "app.example.com")
        XCTAssertEqual(attributes[kSecValueRef as String] as? SecIdentity, identity)
        XCTAssertNil(attributes[kSecValueData as String])
        // Found by its own reference.
        let byReference: [String: Any] = [kSecValueRef as String: identity, kSecReturnRef as String: true]
        XCTAssertEqual(SecItemCopyMatching(byReference as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? SecIdentity, identity)
        // Identities are changed through their halves, not as a whole.
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass as String: kSecClassIdentity] as CFDictionary,
                [kSecAttrLabel as String: "x"] as CFDictionary),
            errSecUnimplemented)

        // Deleting the identity deletes its certificate and its key, and nothing else.
        XCTAssertEqual(SecItemDelete([kSecValueRef as String: identity] as CFDictionary), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(byReference as CFDictionary, &result), errSecItemNotFound)
        XCTAssertEqual(
            SecItemCopyMatching([kSecValueRef as String: leaf] as CFDictionary, nil), errSecItemNotFound)
        let keyQuery: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag]
        XCTAssertEqual(SecItemCopyMatching(keyQuery as CFDictionary, nil), errSecItemNotFound)
        XCTAssertEqual(SecItemCopyMatching([kSecValueRef as String: ca] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassIdentity] as CFDictionary), errSecItemNotFound)

        // Added again as an identity and deleted by class: both halves go.
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassIdentity] as CFDictionary), errSecSuccess)
        let keys: [String: Any] = [kSecClass as String: kSecClassKey, kSecMatchLimit as String: kSecMatchLimitAll]
        XCTAssertEqual(SecItemCopyMatching(keys as CFDictionary, nil), errSecItemNotFound)
        XCTAssertEqual(SecItemCopyMatching([kSecValueRef as String: ca] as CFDictionary, nil), errSecSuccess)
    }

    func testIdentityDeletesKeepWhatOtherIdentitiesAndKeysStillNeed() throws {
        let (identity, ca, leaf) = try leafIdentity()
        // A renewed certificate for the same key, and an unrelated private key.
        try openssl([
            "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "0x77", "-days",
            "30", "-out", "renewed.pem",
        ])
        let renewed = try XCTUnwrap(SecCertificateCreateWithData(nil, try der("renewed") as CFData))
        var error: Unmanaged<CFError>?
        let unrelatedTag = Data("com.example.unrelated".utf8)
        let unrelated: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: unrelatedTag,
        ]
        XCTAssertNotNil(SecKeyCreateRandomKey(unrelated as CFDictionary, &error))
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: renewed] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: ca] as CFDictionary, nil), errSecSuccess)
        func identityCount(_ terms: [String: Any] = [:]) -> Int {
            var query = terms
            query[kSecClass as String] = kSecClassIdentity
            query[kSecReturnRef as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitAll
            var found: CFTypeRef?
            guard SecItemCopyMatching(query as CFDictionary, &found) == errSecSuccess else { return 0 }
            return (found as? [SecIdentity])?.count ?? -1
        }
        XCTAssertEqual(identityCount(), 2)
        // A certificate as the reference of an identity query names that certificate's identity only;
        // the CA has no key, so it names none.
        XCTAssertEqual(identityCount([kSecValueRef as String: renewed]), 1)
        XCTAssertEqual(identityCount([kSecValueRef as String: ca]), 0)
        XCTAssertEqual(
            SecItemDelete([kSecClass as String: kSecClassIdentity, kSecValueRef as String: ca] as CFDictionary),
            errSecItemNotFound)
        // An identity's key is private: asking for a public key class finds none.
        XCTAssertEqual(identityCount([kSecAttrKeyClass as String: kSecAttrKeyClassPublic]), 0)
        XCTAssertEqual(identityCount([kSecAttrKeyClass as String: kSecAttrKeyClassPrivate]), 2)
        // Apple's delete rules: no match limit other than all, no UI skip.
        let limited: [String: Any] = [
            kSecClass as String: kSecClassIdentity, kSecMatchLimit as String: kSecMatchLimitOne,
        ]
        XCTAssertEqual(SecItemDelete(limited as CFDictionary), errSecParam)
        XCTAssertEqual(identityCount(), 2)
        // Identities hand back their reference and attributes, not data (yet).
        let withData: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecReturnData as String: true]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(withData as CFDictionary, &result), errSecUnimplemented)

        // Deleting the old identity keeps the key the renewed certificate still names.
        XCTAssertEqual(
            SecItemDelete([kSecClass as String: kSecClassIdentity, kSecValueRef as String: leaf] as CFDictionary),
            errSecSuccess)
        XCTAssertEqual(identityCount(), 1)
        XCTAssertEqual(identityCount([kSecValueRef as String: renewed]), 1)
        let privateKeys: [String: Any] = [
            kSecClass as String: kSecClassKey, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
        ]
        XCTAssertEqual(SecItemCopyMatching(privateKeys as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual((result as? [[String: Any]])?.count, 2)
        // Deleting the last identity of that key takes the key too, and nothing else.
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassIdentity] as CFDictionary), errSecSuccess)
        XCTAssertEqual(identityCount(), 0)
        XCTAssertEqual(SecItemCopyMatching(privateKeys as CFDictionary, &result), errSecSuccess)
        let remaining = try XCTUnwrap(result as? [[String: Any]])
        XCTAssertEqual(remaining.count, 1)
        XCTAssertEqual(remaining.first?[kSecAttrApplicationTag as String] as? Data, unrelatedTag)
        XCTAssertEqual(SecItemCopyMatching([kSecValueRef as String: ca] as CFDictionary, nil), errSecSuccess)
    }

    func testAnIdentityWhoseKeyCannotBeAddedLeavesNoCertificate() throws {
        let (identity, _, leaf) = try leafIdentity()
        // An issuer given beside the identity is a certificate attribute and no key attribute: the
        // certificate goes in, the key is refused, and the certificate is taken back.
        let add: [String: Any] = [kSecValueRef as String: identity, kSecAttrIssuer as String: Data("issuer".utf8)]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecNoSuchAttr)
        let certificates: [String: Any] = [
            kSecClass as String: kSecClassCertificate, kSecMatchLimit as String: kSecMatchLimitAll,
        ]
        XCTAssertEqual(SecItemCopyMatching(certificates as CFDictionary, nil), errSecItemNotFound)
        // The same certificate stored before is no part of the failed add, and stays.
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: leaf] as CFDictionary, nil), errSecSuccess)
        let again: [String: Any] = [
            kSecValueRef as String: identity, kSecAttrIssuer as String: Data("issuer".utf8),
            kSecAttrLabel as String: "another",
        ]
        XCTAssertEqual(SecItemAdd(again as CFDictionary, nil), errSecNoSuchAttr)
        XCTAssertEqual(SecItemCopyMatching([kSecValueRef as String: leaf] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil), errSecDuplicateItem)
    }

    /// An identity is one request to the keychain service for each operation, so that through the
    /// daemon it is added and deleted whole, in one transaction there.
    func testAnIdentityIsAddedFoundAndDeletedInOneRequestEach() throws {
        let (identity, _, _) = try leafIdentity()
        let directory = keychain.directory + "-identity"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = RecordingService(
            forwardingTo: InProcessKeychainService(
                keychain: try Keychain(directory: directory), client: ClientIdentity(accessGroups: ["TEAM.identity"])))
        KeychainServices.use(service)
        defer { KeychainServices.use(nil) }
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(service.names, ["addIdentity"])
        var found: CFTypeRef?
        let query: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &found), errSecSuccess)
        XCTAssertEqual(found as? SecIdentity, identity)
        XCTAssertEqual(service.names, ["addIdentity", "copyMatching"])
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassIdentity] as CFDictionary), errSecSuccess)
        XCTAssertEqual(service.names, ["addIdentity", "copyMatching", "delete"])
        // Both halves went with the one delete.
        for itemClass in [kSecClassCertificate, kSecClassKey] {
            XCTAssertEqual(
                SecItemCopyMatching([kSecClass as String: itemClass] as CFDictionary, nil), errSecItemNotFound)
        }
    }

    /// An identity whose key is refused leaves no certificate behind: the two are added in one
    /// transaction, not one after the other.
    func testAnIdentityWhoseKeyIsRefusedAddsNothing() throws {
        let (_, leaf) = try makeCertificates()
        let directory = keychain.directory + "-half"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = InProcessKeychainService(
            keychain: try Keychain(directory: directory), client: ClientIdentity(accessGroups: ["TEAM.identity"]))
        let der = SecCertificateCopyData(leaf) as Data
        var certificate = try CertificateAttributes.of(try XCTUnwrap(X509Certificate(der: der)))
        certificate["class"] = .string("cert")
        certificate["v_Data"] = .data(der)
        let refusedKey: [String: ItemValue] = [
            "class": .string("keys"), "kcls": .integer(1), "svce": .string("not a key attribute"),
            "v_Data": .data(Data([1])),
        ]
        XCTAssertThrowsError(try service.addIdentity(certificate: certificate, key: refusedKey)) { error in
            XCTAssertEqual((error as? KeychainCore.KeychainError)?.code, .noSuchAttribute)
        }
        XCTAssertThrowsError(try service.copyMatching(["class": .string("cert")])) { error in
            XCTAssertEqual((error as? KeychainCore.KeychainError)?.code, .itemNotFound)
        }
        // The same certificate with no key of its own (one already stored) is added alone.
        XCTAssertNoThrow(try service.addIdentity(certificate: certificate, key: nil))
        XCTAssertNotNil(try service.copyMatching(["class": .string("cert"), "r_Attributes": .bool(true)]))
    }
}
