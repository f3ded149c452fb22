import COpenSSL
import FoundationEssentials

/// An X.509 certificate parsed by OpenSSL from its DER encoding: what `SecCertificate` reads of it.
public final class X509Certificate: @unchecked Sendable {
    // Never changed after init; OpenSSL's X509 may be read from several threads.
    private let certificate: OpaquePointer
    /// The DER bytes exactly as given.
    public let der: Data

    /// Parses one whole DER certificate (at most 1 MiB); nil when it is not one, or bytes follow it.
    public init?(der: Data) {
        guard !der.isEmpty, der.count <= 1 << 20 else { return nil }
        let parsed: OpaquePointer? = der.withUnsafeBytes { raw in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let certificate = libcrypto.d2i_X509(nil, &cursor, raw.count) else { return nil }
            guard cursor == base + raw.count else {
                libcrypto.X509_free(certificate)
                return nil
            }
            return certificate
        }
        libcrypto.ERR_clear_error()
        guard let parsed else { return nil }
        certificate = parsed
        self.der = der
    }

    deinit { libcrypto.X509_free(certificate) }

    /// X.509 version (1, 2 or 3).
    public var version: Int { Int(libcrypto.X509_get_version(certificate)) + 1 }

    /// The serial number's big-endian bytes (the DER INTEGER's content).
    public var serialNumber: Data {
        guard let serial = libcrypto.X509_get0_serialNumber(certificate),
            let number = libcrypto.ASN1_INTEGER_to_BN(serial, nil)
        else {
            return Data()
        }
        defer { libcrypto.BN_free(number) }
        var bytes = [UInt8](repeating: 0, count: (Int(libcrypto.BN_num_bits(number)) + 7) / 8)
        _ = libcrypto.BN_bn2bin(number, &bytes)
        // The DER content keeps a leading zero when the top bit is set (a positive INTEGER).
        if let first = bytes.first, first & 0x80 != 0 { bytes.insert(0, at: 0) }
        return bytes.isEmpty ? Data([0]) : Data(bytes)
    }

    /// The subject's and the issuer's names, DER-encoded (a SEQUENCE of RDNs).
    public var subjectDER: Data { Self.der(of: libcrypto.X509_get_subject_name(certificate)) }
    public var issuerDER: Data { Self.der(of: libcrypto.X509_get_issuer_name(certificate)) }

    /// The values of the subject's attributes of type `nid` (common names, email addresses), in order.
    public func subjectValues(_ nid: Int32) -> [String] {
        guard let name = libcrypto.X509_get_subject_name(certificate) else { return [] }
        var values: [String] = []
        var index: Int32 = -1
        while true {
            index = libcrypto.X509_NAME_get_index_by_NID(name, nid, index)
            guard index >= 0, let entry = libcrypto.X509_NAME_get_entry(name, index),
                let data = libcrypto.X509_NAME_ENTRY_get_data(entry)
            else { break }
            var utf8: UnsafeMutablePointer<UInt8>?
            let length = libcrypto.ASN1_STRING_to_UTF8(&utf8, data)
            if length >= 0, let utf8 {
                values.append(String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self))
                libcrypto.CRYPTO_free(utf8, #fileID, #line)
            }
        }
        return values
    }

    public static let commonName = NID_commonName
    public static let emailAddress = NID_pkcs9_emailAddress
    public static let organizationalUnit = NID_organizationalUnitName
    public static let organization = NID_organizationName

    /// The rfc822 names of the subject alternative name extension.
    public var alternativeEmailAddresses: [String] {
        guard let names = libcrypto.X509_get_ext_d2i(certificate, NID_subject_alt_name, nil, nil) else { return [] }
        let stack = OpaquePointer(names)
        defer { libcrypto.GENERAL_NAMES_free(stack) }
        var emails: [String] = []
        for index in 0..<libcrypto.OPENSSL_sk_num(stack) {
            guard let raw = libcrypto.OPENSSL_sk_value(stack, index) else { continue }
            let name = raw.assumingMemoryBound(to: GENERAL_NAME.self)
            guard name.pointee.type == GEN_EMAIL, let string = name.pointee.d.rfc822Name,
                let bytes = libcrypto.ASN1_STRING_get0_data(string)
            else { continue }
            emails.append(
                String(
                    decoding: UnsafeBufferPointer(start: bytes, count: Int(libcrypto.ASN1_STRING_length(string))),
                    as: UTF8.self))
        }
        return emails
    }

    /// The subject key identifier extension's bytes, if present.
    public var subjectKeyIdentifier: Data? {
        guard let identifier = libcrypto.X509_get0_subject_key_id(certificate),
            let bytes = libcrypto.ASN1_STRING_get0_data(identifier)
        else { return nil }
        return Data(bytes: bytes, count: Int(libcrypto.ASN1_STRING_length(identifier)))
    }

    /// The public key as X.509 SubjectPublicKeyInfo DER.
    public var publicKeyInfo: Data? {
        guard let key = libcrypto.X509_get0_pubkey(certificate) else { return nil }
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = libcrypto.i2d_PUBKEY(key, &buffer)
        guard length > 0, let buffer else { return nil }
        defer { libcrypto.CRYPTO_free(buffer, #fileID, #line) }
        return Data(bytes: buffer, count: Int(length))
    }

    /// The public key as an `AsymmetricKey`, if it is an RSA key or an EC key on a supported curve:
    /// the key OpenSSL parsed from the SubjectPublicKeyInfo, so its algorithm and curve are what the
    /// certificate says they are, taken in through the checks of any imported key.
    public func publicKey() -> AsymmetricKey? {
        guard let key = libcrypto.X509_get0_pubkey(certificate) else {
            libcrypto.ERR_clear_error()
            return nil
        }
        return try? AsymmetricKey.importing(copyOf: key, isPrivate: false)
    }

    private static func der(of name: OpaquePointer?) -> Data {
        guard let name else { return Data() }
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = libcrypto.i2d_X509_NAME(name, &buffer)
        guard length > 0, let buffer else { return Data() }
        defer { libcrypto.CRYPTO_free(buffer, #fileID, #line) }
        return Data(bytes: buffer, count: Int(length))
    }
}
