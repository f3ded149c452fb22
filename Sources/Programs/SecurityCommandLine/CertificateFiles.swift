import Foundation
import SecurityCommandCore

/// Certificates and keys as files: PEM and DER, read and written, and the one field of a certificate
/// the Security API does not give (its validity dates), read from the DER.
enum CertificateFiles {
    /// The certificates in a file: every `CERTIFICATE` block of a PEM file, else the file as one DER
    /// certificate. Nil when a PEM block is not base64.
    static func certificates(in data: Data) -> [Data]? {
        let text = String(decoding: data, as: UTF8.self)
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        guard text.contains(begin) else { return [data] }
        var found: [Data] = []
        var rest = text[...]
        while let start = rest.range(of: begin) {
            guard let stop = rest[start.upperBound...].range(of: end) else { return nil }
            let body = rest[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
            guard let der = Data(base64Encoded: String(body)) else { return nil }
            found.append(der)
            rest = rest[stop.upperBound...]
        }
        return found
    }

    /// DER as PEM: the label's armour around base64 in lines of 64 characters, as OpenSSL writes it.
    static func pem(_ der: Data, label: String) -> String {
        let base64 = der.base64EncodedString()
        var lines = ["-----BEGIN \(label)-----"]
        var index = base64.startIndex
        while index < base64.endIndex {
            let next = base64.index(index, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[index..<next]))
            index = next
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: DER

    /// One DER element: its tag, and where its contents are in the buffer.
    private struct Element {
        let tag: UInt8
        let contents: Range<Int>
        let end: Int
    }

    /// The element at `offset`, or nil when its length runs past `limit` or is not DER's.
    private static func element(_ bytes: [UInt8], at offset: Int, limit: Int) -> Element? {
        guard offset + 2 <= limit else { return nil }
        let tag = bytes[offset]
        var length = Int(bytes[offset + 1])
        var start = offset + 2
        if length & 0x80 != 0 {
            let count = length & 0x7f
            guard count >= 1, count <= 4, start + count <= limit else { return nil }
            length = 0
            for byte in bytes[start..<start + count] { length = length << 8 | Int(byte) }
            start += count
        }
        guard length <= limit - start else { return nil }
        return Element(tag: tag, contents: start..<start + length, end: start + length)
    }

    /// A certificate's notBefore and notAfter (RFC 5280 §4.1.2.5), or nil when the DER is not shaped
    /// as a certificate.
    static func validity(of der: Data) -> (notBefore: Date, notAfter: Date)? {
        let bytes = [UInt8](der)
        guard let certificate = element(bytes, at: 0, limit: bytes.count), certificate.tag == 0x30,
            let tbs = element(bytes, at: certificate.contents.lowerBound, limit: certificate.end), tbs.tag == 0x30
        else { return nil }
        var offset = tbs.contents.lowerBound
        // [0] version (optional), serial number, signature algorithm; then the issuer and the validity.
        var skipped = 0
        while skipped < 2 {
            guard let field = element(bytes, at: offset, limit: tbs.end) else { return nil }
            offset = field.end
            if field.tag != 0xa0 { skipped += 1 }
        }
        guard let issuer = element(bytes, at: offset, limit: tbs.end), issuer.tag == 0x30,
            let validity = element(bytes, at: issuer.end, limit: tbs.end), validity.tag == 0x30,
            let first = element(bytes, at: validity.contents.lowerBound, limit: validity.end),
            let second = element(bytes, at: first.end, limit: validity.end),
            let notBefore = time(tag: first.tag, bytes[first.contents]),
            let notAfter = time(tag: second.tag, bytes[second.contents])
        else { return nil }
        return (notBefore, notAfter)
    }

    /// UTCTime (YYMMDDHHMMSSZ, years 1950–2049) or GeneralizedTime (YYYYMMDDHHMMSSZ).
    private static func time(tag: UInt8, _ contents: ArraySlice<UInt8>) -> Date? {
        let text = String(decoding: contents, as: UTF8.self)
        var digits: String
        switch tag {
        case 0x17:
            guard text.count == 13, let year = Int(text.prefix(2)) else { return nil }
            digits = (year < 50 ? "20" : "19") + text
        case 0x18:
            guard text.count == 15 else { return nil }
            digits = text
        default: return nil
        }
        guard digits.hasSuffix("Z") else { return nil }
        digits.removeLast()
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMddHHmmss"
        return formatter.date(from: digits)
    }

    // MARK: private keys as PEM

    /// A private key's PEM from its external representation: PKCS#1 `RSA PRIVATE KEY` for RSA, SEC 1
    /// `EC PRIVATE KEY` (RFC 5915) for the NIST curves, built from X9.63 `04‖X‖Y‖K`. Nil for another kind.
    static func privateKeyPEM(externalRepresentation: Data, isRSA: Bool) -> String? {
        if isRSA { return pem(externalRepresentation, label: "RSA PRIVATE KEY") }
        let bytes = [UInt8](externalRepresentation)
        // The curve by the scalar's size: P-256, P-384, P-521; its OID's DER.
        let curves: [Int: [UInt8]] = [
            32: [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07],
            48: [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22],
            66: [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23],
        ]
        guard bytes.first == 0x04, (bytes.count - 1) % 3 == 0 else { return nil }
        let size = (bytes.count - 1) / 3
        guard let oid = curves[size] else { return nil }
        let point = Array(bytes[0..<1 + 2 * size])
        let scalar = Array(bytes[(1 + 2 * size)...])
        let body =
            [0x02, 0x01, 0x01] + encode(0x04, scalar) + encode(0xa0, oid) + encode(0xa1, encode(0x03, [0x00] + point))
        return pem(Data(encode(0x30, body)), label: "EC PRIVATE KEY")
    }

    private static func encode(_ tag: UInt8, _ contents: [UInt8]) -> [UInt8] {
        let count = contents.count
        let length: [UInt8] =
            count < 0x80
            ? [UInt8(count)] : count < 0x100 ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xff)]
        return [tag] + length + contents
    }
}
