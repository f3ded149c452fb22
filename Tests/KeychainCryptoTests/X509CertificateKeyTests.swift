import Foundation
import KeychainBytes
import KeychainCrypto
import XCTest

/// A certificate's public key is the one its SubjectPublicKeyInfo holds, as the openssl command
/// reads it, for every kind of key the keychain supports; other kinds give none.
final class X509CertificateKeyTests: XCTestCase {
    private var work = ""

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            throw XCTSkip("needs the openssl command (Debian's openssl package)")
        }
        work = NSTemporaryDirectory() + "x509-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: work) }

    /// The openssl command's standard output; fails the test when it fails.
    private func openssl(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: work)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw NSError(domain: "openssl", code: Int(process.terminationStatus), userInfo: ["arguments": arguments])
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// A self-signed certificate of a new key made with `newKey` (req's -newkey and its -pkeyopt).
    private func certificate(_ name: String, _ newKey: [String]) throws -> X509Certificate {
        _ = try openssl(
            ["req", "-x509", "-nodes", "-subj", "/CN=\(name)", "-days", "1", "-keyout", name + ".key"]
                + ["-outform", "DER", "-out", name + ".der"] + newKey)
        let der = try Data(contentsOf: URL(fileURLWithPath: work + "/" + name + ".der"))
        return try XCTUnwrap(X509Certificate(der: der), name)
    }

    func testTheKeyIsTheOneOpenSSLReads() throws {
        let kinds: [(String, [String], AsymmetricKey.Kind)] = [
            ("rsa2048", ["-newkey", "rsa:2048"], .rsa(bits: 2048)),
            ("rsa1024", ["-newkey", "rsa:1024"], .rsa(bits: 1024)),
            ("p192", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-192"], .ec(.p192)),
            ("p224", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-224"], .ec(.p224)),
            ("p256", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"], .ec(.p256)),
            ("p384", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"], .ec(.p384)),
            ("p521", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-521"], .ec(.p521)),
        ]
        for (name, newKey, kind) in kinds {
            let certificate = try certificate(name, newKey)
            let key = try XCTUnwrap(certificate.publicKey(), name)
            XCTAssertEqual(key.kind, kind, name)
            XCTAssertFalse(key.isPrivate, name)
            let printed = try openssl(["x509", "-inform", "DER", "-in", name + ".der", "-noout", "-pubkey"])
            XCTAssertEqual(try key.pem().withUnsafeBytes { String(decoding: $0, as: UTF8.self) }, printed, name)
            XCTAssertEqual(certificate.publicKeyInfo, try spki(of: name), name)
        }
    }

    /// The SubjectPublicKeyInfo DER of the certificate `name`, as openssl extracts it.
    private func spki(of name: String) throws -> Data {
        _ = try openssl(["x509", "-inform", "DER", "-in", name + ".der", "-noout", "-pubkey", "-out", name + ".pub"])
        _ = try openssl(["pkey", "-pubin", "-in", name + ".pub", "-outform", "DER", "-out", name + ".spki"])
        return try Data(contentsOf: URL(fileURLWithPath: work + "/" + name + ".spki"))
    }

    /// Keys of a kind or on a curve the keychain has no `SecKey` for.
    func testOtherKindsOfKeyGiveNone() throws {
        let others: [(String, [String])] = [
            ("secp256k1", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:secp256k1"]),
            ("brainpool", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:brainpoolP256r1"]),
            ("ed25519", ["-newkey", "ed25519"]),
        ]
        for (name, newKey) in others {
            XCTAssertNil(try certificate(name, newKey).publicKey(), name)
        }
    }
}
