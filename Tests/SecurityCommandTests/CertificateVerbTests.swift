import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// find-certificate, add-certificates, find-identity, import and export, with certificates and PKCS#12
/// files the `openssl` command makes, checked against what openssl says of them.
final class CertificateVerbTests: XCTestCase {
    private var cli: CommandRunner!
    private var directory: String!

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            throw XCTSkip("needs the openssl command (Debian's openssl package)")
        }
        cli = CommandRunner()
        directory = cli.home + "-files"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
        cli = nil
    }

    @discardableResult
    private func openssl(_ arguments: [String], input: String? = nil) throws -> String {
        let result = try cli.run(
            program: "/bin/sh", ["-c", "cd \"$0\" && exec /usr/bin/openssl \"$@\"", directory] + arguments, input: input
        )
        XCTAssertEqual(result.status, 0, "openssl \(arguments): \(result.stderr)")
        return result.stdout
    }

    /// A self-signed certificate `name.pem` with its key `name.key`.
    private func makeCertificate(_ name: String, subject: String, key: [String]) throws {
        try openssl(
            ["req", "-x509", "-newkey"] + key + [
                "-nodes", "-keyout", name + ".key", "-out", name + ".pem", "-subj", subject, "-days", "30",
            ])
    }

    private func makeEC(_ name: String, subject: String) throws {
        try makeCertificate(name, subject: subject, key: ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
    }

    private func fingerprint(_ name: String, _ digest: String) throws -> String {
        let line = try openssl(["x509", "-in", name + ".pem", "-noout", "-fingerprint", "-" + digest])
        return String(line.split(separator: "=").last ?? "").replacingOccurrences(of: ":", with: "")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    private func read(_ name: String) throws -> String { try String(contentsOfFile: path(name), encoding: .utf8) }

    /// The SHA-1 hashes find-certificate -a -Z lists: what the keychain holds.
    private func storedHashes() throws -> [String] {
        let result = try cli.run("find-certificate", "-a", "-Z")
        guard result.status == 0 else { return [] }
        return result.stdout.split(separator: "\n").filter { $0.hasPrefix("SHA-1 hash: ") }
            .map { String($0.dropFirst("SHA-1 hash: ".count)) }
    }

    func testAddCertificatesFromPEMAndDERAndFindThem() throws {
        try makeEC("alice", subject: "/CN=Alice Example/emailAddress=alice@example.com")
        try makeCertificate("bob", subject: "/CN=Bob RSA", key: ["rsa:2048"])
        try makeEC("carol", subject: "/CN=Carol")
        try makeEC("dave", subject: "/CN=Dave")
        try openssl(["x509", "-in", "bob.pem", "-outform", "DER", "-out", "bob.der"])
        try (read("carol.pem") + read("dave.pem")).write(toFile: path("two.pem"), atomically: true, encoding: .utf8)

        // A file that is no certificate stops the whole command before anything is added.
        try "not a certificate".write(toFile: path("junk.pem"), atomically: true, encoding: .utf8)
        let junk = try cli.run("add-certificates", path("bob.der"), path("junk.pem"))
        XCTAssertEqual(junk.status, 1)
        XCTAssertTrue(junk.stderr.contains("junk.pem"), junk.stderr)
        XCTAssertEqual(try cli.run("find-certificate", "-a").status, 44)

        let added = try cli.run("add-certificates", path("alice.pem"), path("bob.der"), path("two.pem"))
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertEqual(
            Set(try storedHashes()),
            Set(try ["alice", "bob", "carol", "dave"].map { try fingerprint($0, "sha1") }))

        // -Z: both hashes, as openssl computes them, before the attributes.
        let bob = try cli.run("find-certificate", "-c", "Bob", "-Z")
        XCTAssertEqual(bob.status, 0, bob.stderr)
        let lines = bob.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "SHA-256 hash: " + (try fingerprint("bob", "sha256")))
        XCTAssertEqual(lines.dropFirst().first, "SHA-1 hash: " + (try fingerprint("bob", "sha1")))
        XCTAssertTrue(lines.contains("    \"labl\"<blob>=\"Bob RSA\""), bob.stdout)

        // -p: the certificate as openssl writes it; without -a, the first match only.
        let pem = try cli.run("find-certificate", "-c", "Bob", "-p")
        XCTAssertEqual(pem.stdout, try read("bob.pem"))
        let first = try cli.run("find-certificate", "-p")
        XCTAssertEqual(first.stdout.components(separatedBy: "BEGIN CERTIFICATE").count, 2, first.stdout)
        XCTAssertEqual(try cli.run("find-certificate", "-a", "-p").stdout.components(separatedBy: "BEGIN").count, 5)

        // -e matches an address whatever its case; -m shows the addresses.
        let alice = try cli.run("find-certificate", "-e", "ALICE@example.com", "-m")
        XCTAssertEqual(alice.status, 0, alice.stderr)
        XCTAssertTrue(alice.stdout.contains("\"labl\"<blob>=\"Alice Example\""), alice.stdout)
        XCTAssertTrue(alice.stdout.hasSuffix("email addresses: alice@example.com\n"), alice.stdout)
        let nobody = try cli.run("find-certificate", "-e", "nobody@example.com")
        XCTAssertEqual(nobody.status, 44)
        XCTAssertEqual(
            nobody.stderr,
            "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain.\n")
        XCTAssertEqual(try cli.run("find-certificate", "-c", "Zed").status, 44)

        // A certificate already stored is reported, the others in the same command are still added.
        try makeEC("erin", subject: "/CN=Erin")
        let again = try cli.run("add-certificates", path("bob.der"), path("erin.pem"))
        XCTAssertEqual(again.status, 45)
        XCTAssertTrue(again.stderr.contains("already exists in the keychain. (\(path("bob.der")))"), again.stderr)
        XCTAssertEqual(try storedHashes().count, 5)
        XCTAssertTrue(try storedHashes().contains(try fingerprint("erin", "sha1")))

        XCTAssertEqual(try cli.run("add-certificates").status, 2)
        XCTAssertEqual(try cli.run("add-certificates", "-k", "other.keychain", path("erin.pem")).status, 50)
    }

    private func makePKCS12(_ name: String, subject: String, friendlyName: String, passphrase: String) throws {
        try makeEC(name, subject: subject)
        try openssl([
            "pkcs12", "-export", "-in", name + ".pem", "-inkey", name + ".key", "-name", friendlyName,
            "-passout", "pass:" + passphrase, "-out", name + ".p12",
        ])
    }

    func testImportPKCS12AndFindIdentity() throws {
        try makePKCS12("alice", subject: "/CN=Alice", friendlyName: "Alice at work", passphrase: "pw one")
        let wrong = try cli.run("import", path("alice.p12"), "-P", "not it")
        XCTAssertEqual(wrong.status, 51, wrong.stderr)  // errSecAuthFailed's low byte
        XCTAssertFalse(wrong.stderr.contains("not it"), "the passphrase is never shown")
        XCTAssertEqual(try cli.run("find-certificate", "-a").status, 44, "a wrong passphrase imports nothing")

        let imported = try cli.run("import", path("alice.p12"), "-P", "pw one", "-k", cli.home + "/keychain.db")
        XCTAssertEqual(imported.status, 0, imported.stderr)
        XCTAssertEqual(imported.stdout, "1 identity imported.\n")
        XCTAssertEqual(try storedHashes(), [try fingerprint("alice", "sha1")])

        // The passphrase from standard input when -P is not given (not a terminal here).
        try makePKCS12("bob", subject: "/CN=Bob", friendlyName: "Bob", passphrase: "from stdin")
        let piped = try cli.run(["import", path("bob.p12"), "-f", "pkcs12"], input: "from stdin\n")
        XCTAssertEqual(piped.status, 0, piped.stderr)

        // An identity whose certificate expired in 2001: listed, not valid.
        try """
        [ca]
        default_ca = CA_default
        [CA_default]
        database = index.txt
        new_certs_dir = .
        serial = serial
        policy = any
        default_md = sha256
        [any]
        commonName = supplied

        """.write(toFile: path("ca.cnf"), atomically: true, encoding: .utf8)
        try "".write(toFile: path("index.txt"), atomically: true, encoding: .utf8)
        try "01\n".write(toFile: path("serial"), atomically: true, encoding: .utf8)
        try openssl([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "old.key",
            "-out", "old.csr", "-subj", "/CN=Old",
        ])
        try openssl([
            "ca", "-batch", "-config", "ca.cnf", "-selfsign", "-keyfile", "old.key", "-in", "old.csr", "-out",
            "old.pem", "-startdate", "20000101000000Z", "-enddate", "20010101000000Z", "-notext",
        ])
        try openssl([
            "pkcs12", "-export", "-in", "old.pem", "-inkey", "old.key", "-name", "Old one", "-passout", "pass:x",
            "-out", "old.p12",
        ])
        XCTAssertEqual(try cli.run("import", path("old.p12"), "-P", "x").status, 0)
        // A certificate without its key is no identity.
        try makeEC("lonely", subject: "/CN=Lonely")
        XCTAssertEqual(try cli.run("import", path("lonely.pem")).stdout, "1 certificate imported.\n")

        let alice = try fingerprint("alice", "sha1")
        let bob = try fingerprint("bob", "sha1")
        let old = try fingerprint("old", "sha1")
        let all = try cli.run("find-identity")
        XCTAssertEqual(all.status, 0, all.stderr)
        let lines = all.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(lines.first, "Policy: X.509 Basic")
        XCTAssertTrue(lines.contains("     3 identities found"), all.stdout)
        XCTAssertTrue(lines.contains("     2 valid identities found"), all.stdout)
        let matching = lines.prefix { $0 != "  Valid identities only" }.joined(separator: "\n")
        for line in ["\(alice) \"Alice at work\"", "\(bob) \"Bob\"", "\(old) \"Old one\""] {
            XCTAssertTrue(matching.contains(") " + line), "\(line) in \(all.stdout)")
        }
        XCTAssertFalse(all.stdout.contains("Lonely"), all.stdout)

        let valid = try cli.run("find-identity", "-v")
        XCTAssertEqual(valid.status, 0, valid.stderr)
        XCTAssertFalse(valid.stdout.contains("Policy:"), valid.stdout)
        XCTAssertTrue(valid.stdout.contains(") \(alice) \"Alice at work\"\n"), valid.stdout)
        XCTAssertTrue(valid.stdout.contains(") \(bob) \"Bob\"\n"), valid.stdout)
        XCTAssertFalse(valid.stdout.contains(old), valid.stdout)
        XCTAssertTrue(valid.stdout.hasSuffix("     2 valid identities found\n"), valid.stdout)

        let policy = try cli.run("find-identity", "-v", "-p", "codesigning")
        XCTAssertTrue(policy.stdout.hasPrefix("Policy: Code Signing\n"), policy.stdout)
        XCTAssertEqual(try cli.run("find-identity", "-p", "no-such-policy").status, 2)
    }

    func testImportCertificatesAndExport() throws {
        try makeEC("alice", subject: "/CN=Alice")
        try makeCertificate("bob", subject: "/CN=Bob", key: ["rsa:2048"])
        try (read("alice.pem") + read("bob.pem")).write(toFile: path("both.crt"), atomically: true, encoding: .utf8)
        let imported = try cli.run("import", path("both.crt"), "-f", "x509")
        XCTAssertEqual(imported.status, 0, imported.stderr)
        XCTAssertEqual(imported.stdout, "2 certificates imported.\n")
        XCTAssertEqual(try cli.run("import", path("both.crt"), "-f", "x509", "-P", "pw").status, 2)

        // Certificates to standard output and to a file, as a PEM sequence.
        let exported = try cli.run("export", "-t", "certs", "-f", "pemseq")
        XCTAssertEqual(exported.status, 0, exported.stderr)
        XCTAssertEqual(exported.stdout, try read("both.crt"))
        XCTAssertEqual(try cli.run("export", "-o", path("out.pem")).status, 0)
        XCTAssertEqual(try read("out.pem"), try read("both.crt"))

        // Identities: each certificate and its private key, to a new file only this user reads.
        try makeCertificate("rsa", subject: "/CN=RSA identity", key: ["rsa:2048"])
        try openssl([
            "pkcs12", "-export", "-in", "rsa.pem", "-inkey", "rsa.key", "-passout", "pass:p", "-out", "rsa.p12",
        ])
        try makeEC("ec", subject: "/CN=EC identity")
        try openssl(["pkcs12", "-export", "-in", "ec.pem", "-inkey", "ec.key", "-passout", "pass:p", "-out", "ec.p12"])
        for file in ["rsa.p12", "ec.p12"] { XCTAssertEqual(try cli.run("import", path(file), "-P", "p").status, 0) }
        let toTerminal = try cli.run("export", "-t", "identities")
        XCTAssertEqual(toTerminal.status, 2, "private keys are never printed")
        XCTAssertFalse(toTerminal.stdout.contains("PRIVATE KEY"))
        let identities = try cli.run("export", "-t", "identities", "-o", path("identities.pem"))
        XCTAssertEqual(identities.status, 0, identities.stderr)
        let mode = try FileManager.default.attributesOfItem(atPath: path("identities.pem"))[.posixPermissions]
        XCTAssertEqual((mode as? NSNumber)?.intValue, 0o600)
        let text = try read("identities.pem")
        XCTAssertTrue(text.contains("-----BEGIN RSA PRIVATE KEY-----"))
        XCTAssertTrue(text.contains("-----BEGIN EC PRIVATE KEY-----"))
        // Each exported key is the one openssl made for that certificate.
        for name in ["rsa", "ec"] {
            let original = try openssl(["pkey", "-in", name + ".key", "-pubout"])
            XCTAssertTrue(
                try exportedPublicKeys(text).contains(original), "\(name)'s key is exported whole: \(original)")
        }
        XCTAssertEqual(
            try cli.run("export", "-t", "identities", "-o", path("identities.pem")).status, 1,
            "an existing file is not overwritten with private keys")

        let pkcs12 = try cli.run("export", "-t", "identities", "-f", "pkcs12", "-P", "pw", "-o", path("x.p12"))
        XCTAssertEqual(pkcs12.status, 1)
        XCTAssertTrue(pkcs12.stderr.contains("writing PKCS#12 is not supported"), pkcs12.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("x.p12")))
        XCTAssertEqual(try cli.run("export", "-t", "keys").status, 2)
    }

    /// The public keys of the private keys in a PEM file, as openssl derives them.
    private func exportedPublicKeys(_ text: String) throws -> [String] {
        var keys: [String] = []
        for label in ["RSA PRIVATE KEY", "EC PRIVATE KEY"] {
            let begin = "-----BEGIN \(label)-----"
            let end = "-----END \(label)-----\n"
            var rest = text[...]
            while let start = rest.range(of: begin), let stop = rest[start.lowerBound...].range(of: end) {
                let block = String(rest[start.lowerBound..<stop.upperBound])
                try block.write(toFile: path("one.key"), atomically: true, encoding: .utf8)
                keys.append(try openssl(["pkey", "-in", "one.key", "-pubout"]))
                rest = rest[stop.upperBound...]
            }
        }
        return keys
    }
    /// Keys as openssl writes them (PKCS#8, PKCS#1, SEC1 private keys; SubjectPublicKeyInfo public keys;
    /// PEM and DER) import as key items, and export as PEM that openssl reads as the same keys.
    func testKeysImportFromOpenSSLFormatsAndExportAsTheSameKeys() throws {
        try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.pem"])
        try openssl(["pkey", "-in", "rsa.pem", "-traditional", "-out", "rsa-pkcs1.pem"])
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "ec.pem"])
        try openssl(["pkey", "-in", "ec.pem", "-outform", "DER", "-out", "ec.der"])
        try openssl(["pkey", "-in", "rsa.pem", "-pubout", "-out", "rsa-public.pem"])
        var result = try cli.run("import", path("rsa-pkcs1.pem"))
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, "1 key imported.\n")
        XCTAssertEqual(try cli.run("import", path("ec.der"), "-f", "openssl", "-t", "priv").status, 0)
        XCTAssertEqual(try cli.run("import", path("rsa-public.pem"), "-t", "pub").status, 0)
        // -t must say what the file holds; garbage is errSecUnknownFormat, nothing stored.
        result = try cli.run("import", path("rsa-public.pem"), "-t", "priv")
        XCTAssertEqual(result.status, Int32(UInt32(bitPattern: -25257) & 0xff), result.stderr)
        try Data("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n".utf8).write(
            to: URL(fileURLWithPath: path("bad.pem")))
        XCTAssertNotEqual(try cli.run("import", path("bad.pem"), "-f", "openssl").status, 0)

        // Private keys only to a new file of this user's.
        result = try cli.run("export", "-t", "keys")
        XCTAssertEqual(result.status, 2, result.stderr)
        XCTAssertFalse(result.stdout.contains("PRIVATE KEY"))
        result = try cli.run("export", "-t", "keys", "-o", path("keys.pem"))
        XCTAssertEqual(result.status, 0, result.stderr)
        var info = stat()
        XCTAssertEqual(stat(path("keys.pem"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        let exported = try read("keys.pem")
        XCTAssertEqual(exported.components(separatedBy: "-----BEGIN PRIVATE KEY-----").count - 1, 2)
        XCTAssertEqual(exported.components(separatedBy: "-----BEGIN PUBLIC KEY-----").count - 1, 1)
        // openssl reads each block as the key it came from: the public halves agree.
        var publics: [String] = []
        for (index, block) in Self.pemBlocks(exported, label: "PRIVATE KEY").enumerated() {
            try block.write(toFile: path("out-\(index).pem"), atomically: true, encoding: .utf8)
            publics.append(try openssl(["pkey", "-in", "out-\(index).pem", "-pubout"]))
        }
        let originals = try [
            openssl(["pkey", "-in", "rsa.pem", "-pubout"]), openssl(["pkey", "-in", "ec.pem", "-pubout"]),
        ]
        XCTAssertEqual(Set(publics), Set(originals))
        XCTAssertTrue(exported.contains(try read("rsa-public.pem")), "the public key is not exported as it was")
    }

    /// The PEM blocks of `label` in `text`, each with its BEGIN and END lines.
    private static func pemBlocks(_ text: String, label: String) -> [String] {
        let begin = "-----BEGIN \(label)-----"
        let end = "-----END \(label)-----\n"
        var blocks: [String] = []
        var rest = text[...]
        while let start = rest.range(of: begin), let finish = rest[start.upperBound...].range(of: end) {
            blocks.append(String(rest[start.lowerBound..<finish.upperBound]))
            rest = rest[finish.upperBound...]
        }
        return blocks
    }
}
