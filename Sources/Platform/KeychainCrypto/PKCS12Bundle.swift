import COpenSSL
import FoundationEssentials

/// The contents of a PKCS#12 (`.p12`) file: a private key, its certificate and the chain, decrypted with
/// the file's password by OpenSSL.
public struct PKCS12Bundle: Sendable {
    public let key: AsymmetricKey
    public let certificate: X509Certificate
    public let chain: [X509Certificate]
    /// The friendly name the file gives the certificate, if any.
    public let label: String?

    public enum Failure: Error, Equatable, Sendable {
        /// Not a PKCS#12 structure.
        case malformed
        /// The password does not open it (its MAC does not verify).
        case wrongPassword
        /// It opens but holds no key and certificate of the kinds supported (RSA, EC).
        case unsupported
    }

    public static func open(_ data: Data, password: String) throws(Failure) -> PKCS12Bundle {
        guard !data.isEmpty, data.count <= 16 << 20 else { throw .malformed }
        let parsed: OpaquePointer? = data.withUnsafeBytes { raw in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            return libcrypto.d2i_PKCS12(nil, &cursor, raw.count)
        }
        defer { libcrypto.ERR_clear_error() }
        guard let parsed else { throw .malformed }
        defer { libcrypto.PKCS12_free(parsed) }
        // The MAC, when there is one, says whether the password is right; after it, a file that does
        // not open uses what this build cannot decrypt (RC2 or DES, with OpenSSL's legacy provider not
        // loaded), which is no wrong password. (A file without a MAC does not open with a password at
        // all through OpenSSL 3.0's PKCS12_parse, and reads as a wrong one.)
        let hasMAC = libcrypto.PKCS12_mac_present(parsed) == 1
        if hasMAC, libcrypto.PKCS12_verify_mac(parsed, password, -1) != 1 { throw .wrongPassword }
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        var chain: OpaquePointer?
        guard libcrypto.PKCS12_parse(parsed, password, &key, &certificate, &chain) == 1 else {
            throw hasMAC ? .unsupported : .wrongPassword
        }
        defer {
            if let key { libcrypto.EVP_PKEY_free(key) }
            if let certificate { libcrypto.X509_free(certificate) }
            if let chain { libcrypto.OPENSSL_sk_pop_free(chain) { libcrypto.X509_free(OpaquePointer($0)) } }
        }
        guard let key, let certificate, let certificateObject = Self.copy(certificate),
            let keyObject = AsymmetricKey.adopting(copyOf: key)
        else { throw .unsupported }
        var label: String?
        var length: Int32 = 0
        if let alias = libcrypto.X509_alias_get0(certificate, &length), length > 0 {
            label = String(decoding: UnsafeBufferPointer(start: alias, count: Int(length)), as: UTF8.self)
        }
        var others: [X509Certificate] = []
        if let chain {
            for index in 0..<libcrypto.OPENSSL_sk_num(chain) {
                if let raw = libcrypto.OPENSSL_sk_value(chain, index), let copy = Self.copy(OpaquePointer(raw)) {
                    others.append(copy)
                }
            }
        }
        return PKCS12Bundle(key: keyObject, certificate: certificateObject, chain: others, label: label)
    }

    private static func copy(_ certificate: OpaquePointer) -> X509Certificate? {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = libcrypto.i2d_X509(certificate, &buffer)
        guard length > 0, let buffer else { return nil }
        defer { libcrypto.CRYPTO_free(buffer, #fileID, #line) }
        return X509Certificate(der: Data(bytes: buffer, count: Int(length)))
    }
}

extension AsymmetricKey {
    /// A key OpenSSL parsed elsewhere (a PKCS#12 file, a key file), kept by taking a reference of our
    /// own; nil for a type other than RSA or EC, or an unknown curve.
    static func adopting(copyOf key: OpaquePointer, isPrivate: Bool = true) -> AsymmetricKey? {
        let kind: Kind
        switch libcrypto.EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA: kind = .rsa(bits: Int(libcrypto.EVP_PKEY_get_bits(key)))
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard libcrypto.EVP_PKEY_get_utf8_string_param(key, "group", &name, name.count, &length) == 1,
                let curve = Curve(
                    groupName: String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self))
            else { return nil }
            kind = .ec(curve)
        default: return nil
        }
        guard libcrypto.EVP_PKEY_up_ref(key) == 1 else { return nil }
        return AsymmetricKey(retained: key, kind: kind, isPrivate: isPrivate)
    }
}
