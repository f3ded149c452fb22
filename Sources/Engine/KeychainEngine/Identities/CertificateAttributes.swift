import FoundationEssentials
import KeychainCore
import KeychainCrypto

/// What a certificate says of itself as a `kSecClassCertificate` item, read from its DER: the
/// attributes Apple computes for a certificate it stores (spec §8.1), and the terms that name its
/// item. Kept here, below the facade, so that the engine joins identities by the same `pkhh` the
/// facade stores.
public enum CertificateAttributes {
    /// `ctyp` (the X.509 version), `cenc` (3, DER), `subj`, `issr`, `slnr`, `skid` when present, `pkhh`
    /// (the SHA-1 of the public key, which is its private key's `klbl`) and the subject summary as the
    /// label.
    public static func of(_ certificate: X509Certificate) throws -> [String: ItemValue] {
        var attributes = try matchingTerms(of: certificate)
        attributes["class"] = nil
        attributes["cenc"] = .integer(3)
        attributes["subj"] = .data(certificate.subjectDER)
        if let identifier = certificate.subjectKeyIdentifier { attributes["skid"] = .data(identifier) }
        if let summary = subjectSummary(of: certificate) { attributes["labl"] = .string(summary) }
        return attributes
    }

    /// The terms that name a certificate's item: its class and Apple's certificate primary key (type,
    /// issuer, serial number), and its public key's hash.
    public static func matchingTerms(of certificate: X509Certificate) throws -> [String: ItemValue] {
        var terms: [String: ItemValue] = [
            "class": .string("cert"), "ctyp": .integer(Int64(certificate.version)),
            "issr": .data(certificate.issuerDER), "slnr": .data(certificate.serialNumber),
        ]
        if let hash = try publicKeyHash(of: certificate) { terms["pkhh"] = .data(hash) }
        return terms
    }

    /// The SHA-1 of the certificate's public key, as Apple's `pkhh`; nil when OpenSSL reads no key.
    public static func publicKeyHash(of certificate: X509Certificate) throws -> Data? {
        guard let key = certificate.publicKey(), let bytes = try? key.publicRepresentation() else { return nil }
        return try Digest.sha1(bytes)
    }

    /// The subject's most specific name: its common name, else its e-mail address, unit or
    /// organization, else an e-mail address among its alternative names.
    public static func subjectSummary(of certificate: X509Certificate) -> String? {
        for nid in [
            X509Certificate.commonName, X509Certificate.emailAddress, X509Certificate.organizationalUnit,
            X509Certificate.organization,
        ] {
            if let value = certificate.subjectValues(nid).last, !value.isEmpty { return value }
        }
        return certificate.alternativeEmailAddresses.first
    }
}
