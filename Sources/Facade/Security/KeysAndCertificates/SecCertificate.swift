import Foundation
import KeychainCrypto
import KeychainEngine

/// An X.509 certificate (`KeychainCrypto.X509Certificate`). Certificates are equal when their DER
/// encodings are, as `CFEqual` compares them on Apple's platforms.
public final class SecCertificate: SecObject, @unchecked Sendable {
    // Immutable.
    let certificate: X509Certificate

    init(_ certificate: X509Certificate) { self.certificate = certificate }

    override func isSame(as other: SecObject) -> Bool {
        guard let other = other as? SecCertificate else { return false }
        return certificate.der == other.certificate.der
    }

    public override func hash(into hasher: inout Hasher) { hasher.combine(certificate.der) }
}

/// A certificate from its DER encoding; nil when the data is not exactly one certificate.
public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    X509Certificate(der: data.contiguousData).map(SecCertificate.init)
}

public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData { certificate.certificate.der as NSData }

/// A name for people: the subject's common name, else its email address, else its organizational
/// unit or organization (Apple's order of preference).
public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? {
    CertificateAttributes.subjectSummary(of: certificate.certificate).map { $0 as NSString }
}

/// The subject's (last) common name; errSecSuccess with nil when it has none.
public func SecCertificateCopyCommonName(
    _ certificate: SecCertificate, _ commonName: UnsafeMutablePointer<CFString?>
) -> OSStatus {
    commonName.pointee = certificate.certificate.subjectValues(X509Certificate.commonName).last.map { $0 as NSString }
    return errSecSuccess
}

/// The subject's email addresses and the alternative name's rfc822 names.
public func SecCertificateCopyEmailAddresses(
    _ certificate: SecCertificate, _ emailAddresses: UnsafeMutablePointer<CFArray?>
) -> OSStatus {
    let x509 = certificate.certificate
    let all = x509.subjectValues(X509Certificate.emailAddress) + x509.alternativeEmailAddresses
    emailAddresses.pointee = all.map { $0 as NSString } as NSArray
    return errSecSuccess
}

/// The certificate's public key (RSA or EC), or nil for another kind.
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? {
    certificate.certificate.publicKey().map { SecKey(key: $0) }
}

/// The serial number's big-endian bytes.
public func SecCertificateCopySerialNumberData(
    _ certificate: SecCertificate, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    certificate.certificate.serialNumber as NSData
}

/// The issuer's and the subject's names as DER. Apple normalizes the strings in them (case, spaces)
/// before encoding; this project returns them as the certificate encodes them (docs/keys.md).
public func SecCertificateCopyNormalizedIssuerSequence(_ certificate: SecCertificate) -> CFData? {
    certificate.certificate.issuerDER as NSData
}

public func SecCertificateCopyNormalizedSubjectSequence(_ certificate: SecCertificate) -> CFData? {
    certificate.certificate.subjectDER as NSData
}
