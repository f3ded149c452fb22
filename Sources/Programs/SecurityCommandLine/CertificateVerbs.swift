import Foundation
import KeychainBytes
import KeychainCrypto
import Security
import SecurityCommandCore

#if canImport(Glibc)
    import Glibc
#endif

/// The certificate verbs of macOS's `security`: find-certificate, add-certificates, find-identity,
/// import and export, over the public Security API (SecCertificate, SecPKCS12Import, SecItem with
/// kSecClassCertificate and kSecClassIdentity).
struct CertificateVerbs {
    let session: Session

    private enum Functions {
        static let add = "SecCertificateAddToKeychain"
        static let importItems = "SecKeychainItemImport"
        static let export = "SecKeychainItemExport"
    }

    /// A stored certificate: the object and its item's attributes.
    private struct Stored {
        let certificate: SecCertificate
        let attributes: [String: Any]

        var der: Data { SecCertificateCopyData(certificate) as Data }
        var label: String {
            (attributes[kSecAttrLabel as String] as? String)
                ?? SecCertificateCopySubjectSummary(certificate).map { String($0) } ?? ""
        }
        var emailAddresses: [String] {
            var addresses: CFArray?
            _ = SecCertificateCopyEmailAddresses(certificate, &addresses)
            return (addresses as? [String]) ?? []
        }
        var commonName: String? {
            var name: CFString?
            _ = SecCertificateCopyCommonName(certificate, &name)
            return name.map { String($0) }
        }
    }

    /// Every certificate the caller can see, in the keychain's order.
    private func storedCertificates() throws(Failure) -> [Stored] {
        let items = try session.allItems(
            of: kSecClassCertificate, returning: [kSecReturnAttributes as String: true, kSecReturnRef as String: true],
            as: [String: Any].self, function: Function.search)
        return items.compactMap { item in
            (item[kSecValueRef as String] as? SecCertificate).map { Stored(certificate: $0, attributes: item) }
        }
    }

    private static func hex(_ data: Data) -> String { ItemFormatter.hex(data) }

    private static func digest(_ data: Data, sha256: Bool) throws(Failure) -> Data {
        do {
            return sha256 ? try Digest.sha256(data) : try Digest.sha1(data)
        } catch {
            throw .message("cannot hash a certificate: \(error)")
        }
    }

    // MARK: find-certificate

    func findCertificate(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["c", "e"], booleans: ["a", "m", "p", "Z"])
        } catch {
            throw .usage(verb: "find-certificate", message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.search)
        var matches = try storedCertificates().filter { stored in
            if let name = arguments["c"],
                !([stored.label, stored.commonName ?? ""].contains { $0.contains(name) })
            {
                return false
            }
            if let email = arguments["e"]?.lowercased(),
                !stored.emailAddresses.contains(where: { $0.lowercased() == email })
            {
                return false
            }
            return true
        }
        guard !matches.isEmpty else { throw .keychain(errSecItemNotFound, function: Function.search) }
        if !arguments.has("a") { matches = [matches[0]] }
        var blocks: [String] = []
        for stored in matches {
            var lines: [String] = []
            if arguments.has("Z") {
                lines.append("SHA-256 hash: " + Self.hex(try Self.digest(stored.der, sha256: true)))
                lines.append("SHA-1 hash: " + Self.hex(try Self.digest(stored.der, sha256: false)))
            }
            if arguments.has("p") {
                lines.append(CertificateFiles.pem(stored.der, label: "CERTIFICATE").dropLast().description)
            } else {
                lines.append(
                    ItemFormatter.block(
                        itemClass: "cert", attributes: stored.attributes, keychainPath: session.databasePath))
            }
            if arguments.has("m") {
                lines.append("email addresses: " + stored.emailAddresses.joined(separator: ", "))
            }
            blocks.append(lines.joined(separator: "\n"))
        }
        print(blocks.joined(separator: "\n"))
    }

    // MARK: add-certificates

    func addCertificates(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["k"])
        } catch {
            throw .usage(verb: "add-certificates", message: error.message)
        }
        if let keychain = arguments.bytes("k") {
            try session.checkKeychainNames([CommandArgument(keychain)], function: Functions.add)
        }
        let files = arguments.positional.map(\.text)
        guard !files.isEmpty else { throw .usage(verb: "add-certificates", message: "no certificate file given") }
        // Every file is read and parsed before anything is added: a bad file adds nothing.
        var certificates: [(String, SecCertificate)] = []
        for file in files {
            for certificate in try Self.readCertificates(file) { certificates.append((file, certificate)) }
        }
        // A certificate that cannot be added (one already stored) does not stop the others, as on macOS;
        // each failure is reported in turn and the last one ends the command.
        var failure: Failure?
        for (file, certificate) in certificates {
            let status = SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil)
            guard status != errSecSuccess else { continue }
            if let earlier = failure { FileHandle.standardError.write(Data((earlier.text + "\n").utf8)) }
            failure = Failure.keychain(status, function: Functions.add, detail: file).withServiceReason
        }
        if let failure { throw failure }
    }

    private static func readFile(_ path: String) throws(Failure) -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .message("\(path): cannot read the file")
        }
        return data
    }

    /// The certificates of a PEM or DER file, each parsed by SecCertificateCreateWithData.
    private static func readCertificates(_ path: String) throws(Failure) -> [SecCertificate] {
        let data = try readFile(path)
        guard let ders = CertificateFiles.certificates(in: data), !ders.isEmpty else {
            throw .message("\(path): no certificate in the file (PEM or DER)")
        }
        var certificates: [SecCertificate] = []
        for der in ders {
            guard let certificate = SecCertificateCreateWithData(nil, der as CFData) else {
                throw .message("\(path): not a certificate (PEM or DER)")
            }
            certificates.append(certificate)
        }
        return certificates
    }

    // MARK: find-identity

    /// The policies of macOS's `-p`, with the names it prints. They name the section; no policy is
    /// evaluated (there is no trust evaluation yet), so `-v` checks the validity dates alone.
    static let policies: [(String, String)] = [
        ("basic", "X.509 Basic"), ("ssl-client", "SSL (client)"), ("ssl-server", "SSL (server)"),
        ("smime", "S/MIME"), ("eap", "EAP"), ("ipsec", "IPsec"), ("ichat", "iChat"),
        ("codesigning", "Code Signing"), ("sys-default", "System Default"), ("sys-kerberos-kdc", "Kerberos KDC"),
        ("macappstore", "Mac App Store Receipt"), ("appleID", "Apple ID Sharing"),
    ]

    func findIdentity(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["p", "s"], booleans: ["v"])
        } catch {
            throw .usage(verb: "find-identity", message: error.message)
        }
        try session.checkKeychainNames(arguments.positional, function: Function.search)
        var policyName = "X.509 Basic"
        if let policy = arguments["p"] {
            guard let known = Self.policies.first(where: { $0.0 == policy }) else {
                throw .usage(verb: "find-identity", message: "unknown policy \"\(policy)\"")
            }
            policyName = known.1
        }
        // The identities' certificate attributes (no private key is read, so nobody is asked), paired
        // with the stored certificates by issuer and serial number.
        let identities = try session.allItems(
            of: kSecClassIdentity, returning: [kSecReturnAttributes as String: true], as: [String: Any].self,
            function: Function.search)
        let certificates = try storedCertificates()
        func key(_ attributes: [String: Any]) -> [Data?] {
            [kSecAttrIssuer, kSecAttrSerialNumber].map { attributes[$0 as String] as? Data }
        }
        var all: [Stored] = []
        for identity in identities {
            if let stored = certificates.first(where: { key($0.attributes) == key(identity) }) { all.append(stored) }
        }
        let now = Date()
        let valid = all.filter { stored in
            guard let validity = CertificateFiles.validity(of: stored.der) else { return false }
            return validity.notBefore <= now && now <= validity.notAfter
        }
        func list(_ stored: [Stored]) throws(Failure) -> [String] {
            var lines: [String] = []
            for (index, identity) in stored.enumerated() {
                let hash = Self.hex(try Self.digest(identity.der, sha256: false))
                lines.append("  \(index + 1)) \(hash) " + ItemFormatter.quoted(Data(identity.label.utf8)))
            }
            return lines
        }
        var lines: [String] = []
        if arguments.has("v") {
            if arguments.has("p") { lines += ["Policy: \(policyName)", "  Matching identities"] }
            lines += try list(valid)
            lines.append("     \(valid.count) valid identities found")
        } else {
            lines += ["Policy: \(policyName)", "  Matching identities"]
            lines += try list(all)
            lines += ["     \(all.count) identities found", "", "  Valid identities only"]
            lines += try list(valid)
            lines.append("     \(valid.count) valid identities found")
        }
        print(lines.joined(separator: "\n"))
    }

    // MARK: import

    func importFile(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["f", "P", "k", "t"])
        } catch {
            throw .usage(verb: "import", message: error.message)
        }
        if let type = arguments["t"], !["cert", "priv", "pub"].contains(type) {
            throw .usage(verb: "import", message: "-t takes cert, priv or pub")
        }
        if let keychain = arguments.bytes("k") {
            try session.checkKeychainNames([CommandArgument(keychain)], function: Functions.importItems)
        }
        guard arguments.positional.count == 1, let path = arguments.positional.first?.text else {
            throw .usage(verb: "import", message: "give one file to import")
        }
        let data = try Self.readFile(path)
        let format: String
        if let given = arguments["f"] {
            guard ["pkcs12", "x509", "openssl"].contains(given) else {
                throw .usage(verb: "import", message: "-f takes pkcs12, x509 or openssl")
            }
            format = given
        } else if arguments["t"] == "priv" || arguments["t"] == "pub" {
            format = "openssl"
        } else if arguments["t"] == "cert" {
            format = "x509"
        } else if (try? AsymmetricKey.importingFile(data)) != nil {
            format = "openssl"
        } else {
            let lowered = path.lowercased()
            let isCertificate =
                CertificateFiles.certificates(in: data).map { ders in
                    !ders.isEmpty && ders.allSatisfy { SecCertificateCreateWithData(nil, $0 as CFData) != nil }
                } ?? false
            format = lowered.hasSuffix(".p12") || lowered.hasSuffix(".pfx") || !isCertificate ? "pkcs12" : "x509"
        }
        if format == "openssl" {
            if arguments.has("P") { throw .usage(verb: "import", message: "-P is the passphrase of a PKCS#12 file") }
            try importKey(data, path: path, expected: arguments["t"])
            return
        }
        if format == "x509" {
            if arguments.has("P") { throw .usage(verb: "import", message: "-P is the passphrase of a PKCS#12 file") }
            let certificates = try Self.readCertificates(path)
            for certificate in certificates {
                let status = SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil)
                guard status == errSecSuccess else { throw .keychain(status, function: Functions.importItems) }
            }
            print(certificates.count == 1 ? "1 certificate imported." : "\(certificates.count) certificates imported.")
            return
        }
        try importPKCS12(data, passphrase: try passphrase(arguments, for: path))
    }

    /// An RSA or EC key file, stored as a key item labelled with the file's name (through
    /// `SecKeyCreateWithData` and `SecItemAdd`, as an app would). `expected` (-t) must match what the
    /// file holds.
    private func importKey(_ data: Data, path: String, expected: String?) throws(Failure) {
        let key: AsymmetricKey
        do {
            key = try AsymmetricKey.importingFile(data)
        } catch {
            throw .keychain(errSecUnknownFormat, function: Functions.importItems, detail: "\(path): \(error)")
        }
        if let expected, expected != (key.isPrivate ? "priv" : "pub") {
            throw .keychain(
                errSecUnknownFormat, function: Functions.importItems,
                detail: "\(path) holds a \(key.isPrivate ? "private" : "public") key, not -t \(expected)")
        }
        var external: Data
        do {
            external = try key.externalRepresentation().withUnsafeBytes { Data($0) }
        } catch {
            throw .keychain(errSecInternalComponent, function: Functions.importItems, detail: "\(error)")
        }
        defer { external.resetBytes(in: 0..<external.count) }
        let type: CFString
        switch key.kind {
        case .rsa: type = kSecAttrKeyTypeRSA
        case .ec: type = kSecAttrKeyTypeECSECPrimeRandom
        }
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: type,
            kSecAttrKeyClass as String: key.isPrivate ? kSecAttrKeyClassPrivate : kSecAttrKeyClassPublic,
        ]
        var error: Unmanaged<CFError>?
        guard let secKey = SecKeyCreateWithData(external as CFData, attributes as CFDictionary, &error) else {
            let reason = error.map { String(describing: $0.takeRetainedValue()) } ?? "no reason given"
            throw .keychain(errSecUnknownFormat, function: Functions.importItems, detail: reason)
        }
        let label = (path as NSString).lastPathComponent
        let add: [String: Any] = [kSecValueRef as String: secKey, kSecAttrLabel as String: label]
        let status = try session.retryingWhenLocked { SecItemAdd(add as CFDictionary, nil) }
        guard status == errSecSuccess else { throw .keychain(status, function: Functions.importItems) }
        print("1 key imported.")
    }

    /// `-P`, else one line typed without echo on a terminal, else one line of standard input (empty
    /// when there is none: a file without a password).
    private func passphrase(_ arguments: Arguments, for path: String) throws(Failure) -> String {
        if let given = arguments["P"] { return given }
        let line =
            Terminal.inputIsTerminal
            ? Terminal.readSecret(prompt: "passphrase for \(path): ") : Terminal.readLine()
        return line.map { $0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } } ?? ""
    }

    private func importPKCS12(_ data: Data, passphrase: String) throws(Failure) {
        var items: CFArray?
        let options = [kSecImportExportPassphrase as String: passphrase] as CFDictionary
        let status = SecPKCS12Import(data as CFData, options, &items)
        guard status == errSecSuccess, let imported = items as? [[String: Any]] else {
            throw .keychain(status == errSecSuccess ? errSecDecode : status, function: Functions.importItems)
        }
        var identities = 0
        var certificates = 0
        for entry in imported {
            guard let identity = entry[kSecImportItemIdentity as String] as? SecIdentity else { continue }
            var add: [String: Any] = [kSecValueRef as String: identity]
            if let label = entry[kSecImportItemLabel as String] as? String { add[kSecAttrLabel as String] = label }
            let added = SecItemAdd(add as CFDictionary, nil)
            guard added == errSecSuccess else { throw .keychain(added, function: Functions.importItems) }
            identities += 1
            // The chain after the identity's own certificate; one already stored is not an error.
            for certificate in (entry[kSecImportItemCertChain as String] as? [SecCertificate] ?? []).dropFirst() {
                let status = SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil)
                if status == errSecSuccess {
                    certificates += 1
                } else if status != errSecDuplicateItem {
                    throw .keychain(status, function: Functions.importItems)
                }
            }
        }
        var lines = [identities == 1 ? "1 identity imported." : "\(identities) identities imported."]
        if certificates > 0 {
            lines.append(certificates == 1 ? "1 certificate imported." : "\(certificates) certificates imported.")
        }
        print(lines.joined(separator: "\n"))
    }

    // MARK: export

    func export(_ rawArguments: [CommandArgument]) throws(Failure) {
        let arguments: Arguments
        do {
            arguments = try Arguments(rawArguments, takingValue: ["t", "f", "P", "o", "k"])
        } catch {
            throw .usage(verb: "export", message: error.message)
        }
        if let keychain = arguments.bytes("k") {
            try session.checkKeychainNames([CommandArgument(keychain)], function: Functions.export)
        }
        try session.checkKeychainNames(arguments.positional, function: Functions.export)
        let type = arguments["t"] ?? "certs"
        guard ["certs", "keys", "identities"].contains(type) else {
            throw .usage(verb: "export", message: "-t takes certs, keys or identities")
        }
        let format = arguments["f"] ?? "pemseq"
        guard ["pemseq", "pkcs12"].contains(format) else {
            throw .usage(verb: "export", message: "-f takes pemseq or pkcs12")
        }
        if format == "pkcs12" {
            throw .message(
                "export -f pkcs12: writing PKCS#12 is not supported (the Security module reads PKCS#12 but cannot write it); export with -f pemseq"
            )
        }
        if arguments.has("P") {
            throw .usage(verb: "export", message: "-P is the passphrase of -f pkcs12; -f pemseq is not encrypted")
        }
        if type == "certs" {
            let certificates = try storedCertificates()
            guard !certificates.isEmpty else { throw .keychain(errSecItemNotFound, function: Functions.export) }
            let text = certificates.map { CertificateFiles.pem($0.der, label: "CERTIFICATE") }.joined()
            try write(Data(text.utf8), to: arguments["o"], secret: false)
            return
        }
        if type == "keys" {
            let (text, hasPrivate) = try keysPEM()
            // Private keys are never printed: they go to a new file only this user can read.
            guard !hasPrivate || arguments["o"] != nil else {
                throw .usage(verb: "export", message: "-t keys writes private keys: give -o file")
            }
            var bytes = text.withUnsafeBytes { Data($0) }
            defer { bytes.resetBytes(in: 0..<bytes.count) }
            try write(bytes, to: arguments["o"], secret: hasPrivate)
            return
        }
        // Private keys are never printed: they go to a file only this user can read.
        guard let output = arguments["o"] else {
            throw .usage(verb: "export", message: "-t identities writes private keys: give -o file")
        }
        try write(try identitiesPEM(), to: output, secret: true)
    }

    /// Every exportable key item as PEM (OpenSSL's PKCS#8 and SubjectPublicKeyInfo), and whether any
    /// is private. Enclave keys, whose private part never leaves the keychain, are skipped.
    private func keysPEM() throws(Failure) -> (SecureBytes, Bool) {
        let keys = try session.allItems(
            of: kSecClassKey, returning: [kSecReturnRef as String: true], as: SecKey.self, function: Functions.export)
        guard !keys.isEmpty else { throw .keychain(errSecItemNotFound, function: Functions.export) }
        var pieces: [SecureBytes] = []
        var hasPrivate = false
        for secKey in keys {
            guard let attributes = SecKeyCopyAttributes(secKey) as? [String: Any],
                var external = SecKeyCopyExternalRepresentation(secKey, nil) as Data?
            else { continue }  // an enclave key: its private part cannot be exported
            defer { external.resetBytes(in: 0..<external.count) }
            // The class as a string ("1", Apple's kSecAttrKeyClassPrivate) or as the number it stands for.
            let keyClass = attributes[kSecAttrKeyClass as String]
            let isPrivate =
                (keyClass as? String) == (kSecAttrKeyClassPrivate as String) || (keyClass as? NSNumber)?.intValue == 1
            // PKCS#1 (RSA) is a DER SEQUENCE; X9.63 (EC) starts with 04.
            let isRSA = external.first == 0x30
            do {
                let key = try AsymmetricKey.importing(external, kind: isRSA ? .rsa : .ec, isPrivate: isPrivate)
                pieces.append(try key.pem())
                hasPrivate = hasPrivate || isPrivate
            } catch {
                throw .keychain(errSecInternalComponent, function: Functions.export, detail: "\(error)")
            }
        }
        guard !pieces.isEmpty else {
            throw .keychain(
                errSecItemNotFound, function: Functions.export,
                detail: "no key here can be exported (enclave keys never are)")
        }
        let total = pieces.reduce(0) { $0 + $1.count }
        let joined: SecureBytes
        do {
            joined = try SecureBytes(
                count: total,
                filling: { buffer in
                    var offset = 0
                    for piece in pieces {
                        piece.withUnsafeBytes { bytes in
                            UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<offset + bytes.count]).copyMemory(
                                from: bytes)
                        }
                        offset += piece.count
                    }
                })
        } catch {
            throw .keychain(errSecAllocate, function: Functions.export)
        }
        return (joined, hasPrivate)
    }

    /// Each identity's certificate and then its private key, as PEM.
    private func identitiesPEM() throws(Failure) -> Data {
        let identities = try session.allItems(
            of: kSecClassIdentity, returning: [kSecReturnRef as String: true], as: SecIdentity.self,
            function: Functions.export)
        guard !identities.isEmpty else { throw .keychain(errSecItemNotFound, function: Functions.export) }
        var text = ""
        for identity in identities {
            var certificate: SecCertificate?
            var privateKey: SecKey?
            guard SecIdentityCopyCertificate(identity, &certificate) == errSecSuccess, let certificate,
                SecIdentityCopyPrivateKey(identity, &privateKey) == errSecSuccess, let privateKey
            else { throw .keychain(errSecInternalComponent, function: Functions.export) }
            // PKCS#1 (RSA) is a DER SEQUENCE; X9.63 (EC) starts with 04.
            guard let external = SecKeyCopyExternalRepresentation(privateKey, nil) as Data?,
                let keyPEM = CertificateFiles.privateKeyPEM(
                    externalRepresentation: external, isRSA: external.first == 0x30)
            else {
                throw .keychain(
                    errSecUnimplemented, function: Functions.export,
                    detail:
                        "an identity's private key cannot be exported: an enclave key never leaves the keychain, and only RSA and P-256, P-384 and P-521 keys are written as PEM"
                )
            }
            text += CertificateFiles.pem(SecCertificateCopyData(certificate) as Data, label: "CERTIFICATE") + keyPEM
        }
        return Data(text.utf8)
    }

    /// To standard output, or to the file: a new file with mode 0600 when it holds secrets (an existing
    /// one is refused rather than left readable by others), else 0644 (umask permitting).
    private func write(_ data: Data, to path: String?, secret: Bool) throws(Failure) {
        guard let path else {
            FileHandle.standardOutput.write(data)
            return
        }
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (secret ? O_EXCL : O_TRUNC)
        let descriptor = open(path, flags, secret ? 0o600 : 0o644)
        guard descriptor >= 0 else {
            throw .message("\(path): \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: data)
            try handle.synchronize()
        } catch {
            throw .message("\(path): \(error.localizedDescription)")
        }
    }
}
