import Foundation
import KeychainBytes
import KeychainCrypto

/// `SecKeyAlgorithm`: a CFString naming an algorithm, with Apple's string values (`algid:…`).
public struct SecKeyAlgorithm: RawRepresentable, Hashable, @unchecked Sendable {
    // The raw value is an immutable constant string.
    public let rawValue: CFString

    public init(rawValue: CFString) { self.rawValue = rawValue }

    init(_ value: String) { rawValue = SecConstantString(string: value) }

    public static func == (lhs: SecKeyAlgorithm, rhs: SecKeyAlgorithm) -> Bool {
        String(describing: lhs.rawValue) == String(describing: rhs.rawValue)
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(String(describing: rawValue)) }

    var name: String { String(describing: rawValue) }
}

/// `SecKeyOperationType` (Apple's raw values).
public enum SecKeyOperationType: Int, Sendable {
    case sign = 0
    case verify = 1
    case encrypt = 2
    case decrypt = 3
    case keyExchange = 4
}

extension SecKeyAlgorithm {
    public static let ecdsaSignatureRFC4754 = SecKeyAlgorithm("algid:sign:ECDSA:RFC4754")
    public static let ecdsaSignatureDigestX962 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962")
    public static let ecdsaSignatureDigestX962SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA1")
    public static let ecdsaSignatureDigestX962SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA224")
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA256")
    public static let ecdsaSignatureDigestX962SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA384")
    public static let ecdsaSignatureDigestX962SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA512")
    public static let ecdsaSignatureMessageX962SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA1")
    public static let ecdsaSignatureMessageX962SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA224")
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA256")
    public static let ecdsaSignatureMessageX962SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA384")
    public static let ecdsaSignatureMessageX962SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA512")

    public static let rsaSignatureRaw = SecKeyAlgorithm("algid:sign:RSA:raw")
    public static let rsaSignatureDigestPKCS1v15Raw = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15")
    public static let rsaSignatureDigestPKCS1v15SHA1 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA1")
    public static let rsaSignatureDigestPKCS1v15SHA224 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA224")
    public static let rsaSignatureDigestPKCS1v15SHA256 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA256")
    public static let rsaSignatureDigestPKCS1v15SHA384 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA384")
    public static let rsaSignatureDigestPKCS1v15SHA512 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA512")
    public static let rsaSignatureMessagePKCS1v15SHA1 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA1")
    public static let rsaSignatureMessagePKCS1v15SHA224 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA224")
    public static let rsaSignatureMessagePKCS1v15SHA256 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA256")
    public static let rsaSignatureMessagePKCS1v15SHA384 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA384")
    public static let rsaSignatureMessagePKCS1v15SHA512 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA512")
    public static let rsaSignatureDigestPSSSHA1 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA1:SHA1:20")
    public static let rsaSignatureDigestPSSSHA224 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA224:SHA224:24")
    public static let rsaSignatureDigestPSSSHA256 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA256:SHA256:32")
    public static let rsaSignatureDigestPSSSHA384 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA384:SHA384:48")
    public static let rsaSignatureDigestPSSSHA512 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA512:SHA512:64")
    public static let rsaSignatureMessagePSSSHA1 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA1:SHA1:20")
    public static let rsaSignatureMessagePSSSHA224 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA224:SHA224:24")
    public static let rsaSignatureMessagePSSSHA256 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA256:SHA256:32")
    public static let rsaSignatureMessagePSSSHA384 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA384:SHA384:48")
    public static let rsaSignatureMessagePSSSHA512 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA512:SHA512:64")

    public static let rsaEncryptionRaw = SecKeyAlgorithm("algid:encrypt:RSA:raw")
    public static let rsaEncryptionPKCS1 = SecKeyAlgorithm("algid:encrypt:RSA:PKCS1")
    public static let rsaEncryptionOAEPSHA1 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA1")
    public static let rsaEncryptionOAEPSHA224 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA224")
    public static let rsaEncryptionOAEPSHA256 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA256")
    public static let rsaEncryptionOAEPSHA384 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA384")
    public static let rsaEncryptionOAEPSHA512 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA512")
    public static let rsaEncryptionOAEPSHA1AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA1:AESGCM")
    public static let rsaEncryptionOAEPSHA224AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA224:AESGCM")
    public static let rsaEncryptionOAEPSHA256AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA256:AESGCM")
    public static let rsaEncryptionOAEPSHA384AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA384:AESGCM")
    public static let rsaEncryptionOAEPSHA512AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA512:AESGCM")

    /// The signature scheme this algorithm names, or nil when it is no signature this project makes.
    var signatureScheme: SignatureScheme? {
        let hashes: [(String, Hash)] = [
            ("SHA1", .sha1), ("SHA224", .sha224), ("SHA256", .sha256), ("SHA384", .sha384), ("SHA512", .sha512),
        ]
        if name == "algid:sign:ECDSA:RFC4754" { return .ecdsaRawRS }
        if name == "algid:sign:RSA:raw" { return .rsaRaw }
        let parts = name.split(separator: ":").map(String.init)
        guard parts.count >= 4, parts[0] == "algid", parts[1] == "sign" else { return nil }
        let input: SignatureInput? =
            parts[3].hasPrefix("message-") ? .message : parts[3].hasPrefix("digest-") ? .digest : nil
        let hash = parts.count > 4 ? hashes.first { $0.0 == parts[4] }?.1 : nil
        guard let input else { return nil }
        let padding = parts[3].split(separator: "-").last.map(String.init)
        switch (parts[2], padding, hash) {
        case ("ECDSA", "X962", let hash?) where parts.count == 5: return .ecdsa(hash, input)
        case ("ECDSA", "X962", nil) where parts.count == 4 && input == .digest: return .ecdsaDigest
        case ("RSA", "PKCS1v15", nil) where parts.count == 4 && input == .digest: return .rsaPKCS1v15(nil, .digest)
        case ("RSA", "PKCS1v15", let hash?) where parts.count == 5: return .rsaPKCS1v15(hash, input)
        // PSS names repeat the hash (for MGF1) and end with a salt length; Apple's salt is always the
        // digest's length, whatever the name says (its SHA-224 names say 24, and it uses 28). Only
        // Apple's own names are taken.
        case ("RSA", "PSS", let hash?) where parts.count == 7 && parts[5] == parts[4]:
            let named = hash == .sha224 ? "24" : "\(hash.length)"
            guard parts[6] == named else { return nil }
            return .rsaPSS(hash, input, saltLength: hash.length)
        default: return nil
        }
    }

    var encryptionScheme: EncryptionScheme? {
        switch name {
        case "algid:encrypt:RSA:raw": .rsaRaw
        case "algid:encrypt:RSA:PKCS1": .rsaPKCS1
        case "algid:encrypt:RSA:OAEP:SHA1": .rsaOAEP(.sha1)
        case "algid:encrypt:RSA:OAEP:SHA224": .rsaOAEP(.sha224)
        case "algid:encrypt:RSA:OAEP:SHA256": .rsaOAEP(.sha256)
        case "algid:encrypt:RSA:OAEP:SHA384": .rsaOAEP(.sha384)
        case "algid:encrypt:RSA:OAEP:SHA512": .rsaOAEP(.sha512)
        default: nil
        }
    }

    /// The OAEP hash of an RSA-OAEP-AES-GCM algorithm; nil when it is none.
    var rsaHybridHash: Hash? {
        switch name {
        case "algid:encrypt:RSA:OAEP:SHA1:AESGCM": .sha1
        case "algid:encrypt:RSA:OAEP:SHA224:AESGCM": .sha224
        case "algid:encrypt:RSA:OAEP:SHA256:AESGCM": .sha256
        case "algid:encrypt:RSA:OAEP:SHA384:AESGCM": .sha384
        case "algid:encrypt:RSA:OAEP:SHA512:AESGCM": .sha512
        default: nil
        }
    }
}

extension SecKeyAlgorithm {
    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm("algid:keyexchange:ECDH")
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm("algid:keyexchange:ECDHC")
    public static let ecdhKeyExchangeStandardX963SHA1 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA1")
    public static let ecdhKeyExchangeStandardX963SHA224 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA224")
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA256")
    public static let ecdhKeyExchangeStandardX963SHA384 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA384")
    public static let ecdhKeyExchangeStandardX963SHA512 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA512")
    public static let ecdhKeyExchangeCofactorX963SHA1 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA1")
    public static let ecdhKeyExchangeCofactorX963SHA224 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA224")
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA256")
    public static let ecdhKeyExchangeCofactorX963SHA384 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA384")
    public static let ecdhKeyExchangeCofactorX963SHA512 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA512")

    /// An ECDH algorithm: nil when it is none; `.some(nil)` for the raw shared secret, else the KDF's hash.
    var keyExchangeKDF: Hash?? {
        let parts = name.split(separator: ":").map(String.init)
        guard parts.count >= 3, parts[0] == "algid", parts[1] == "keyexchange", ["ECDH", "ECDHC"].contains(parts[2])
        else { return nil }
        if parts.count == 3 { return .some(nil) }
        let hashes: [String: Hash] = [
            "SHA1": .sha1, "SHA224": .sha224, "SHA256": .sha256, "SHA384": .sha384, "SHA512": .sha512,
        ]
        guard parts.count == 5, parts[3] == "KDFX963", let hash = hashes[parts[4]] else { return nil }
        return .some(hash)
    }
}

/// `kSecKeyKeyExchangeParameterRequestedSize` and `kSecKeyKeyExchangeParameterSharedInfo`.
nonisolated(unsafe) public let kSecKeyKeyExchangeParameterRequestedSize: CFString = SecConstantString(
    string: "requestedSize")
nonisolated(unsafe) public let kSecKeyKeyExchangeParameterSharedInfo: CFString = SecConstantString(
    string: "sharedInfo")

/// The keys of `SecKeyCopyKeyExchangeResult`'s parameters as Swift sees them on Apple's platforms
/// (the header's `CF_STRING_ENUM`): `SecKeyKeyExchangeParameter.requestedSize.rawValue`.
public struct SecKeyKeyExchangeParameter: RawRepresentable, Hashable, @unchecked Sendable {
    // The raw value is an immutable constant string.
    public let rawValue: CFString

    public init(rawValue: CFString) { self.rawValue = rawValue }

    public static let requestedSize = SecKeyKeyExchangeParameter(rawValue: kSecKeyKeyExchangeParameterRequestedSize)
    public static let sharedInfo = SecKeyKeyExchangeParameter(rawValue: kSecKeyKeyExchangeParameterSharedInfo)

    public static func == (lhs: SecKeyKeyExchangeParameter, rhs: SecKeyKeyExchangeParameter) -> Bool {
        String(describing: lhs.rawValue) == String(describing: rhs.rawValue)
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(String(describing: rawValue)) }
}

extension SecKeyAlgorithm {
    public static let eciesEncryptionStandardX963SHA1AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM")
    public static let eciesEncryptionStandardX963SHA224AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM")
    public static let eciesEncryptionStandardX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM")
    public static let eciesEncryptionStandardX963SHA384AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM")
    public static let eciesEncryptionStandardX963SHA512AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM")
    public static let eciesEncryptionCofactorX963SHA1AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM")
    public static let eciesEncryptionCofactorX963SHA224AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM")
    public static let eciesEncryptionCofactorX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM")
    public static let eciesEncryptionCofactorX963SHA384AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM")
    public static let eciesEncryptionCofactorX963SHA512AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM")
    public static let eciesEncryptionStandardVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV")
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV")
    public static let eciesEncryptionStandardVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV")
    public static let eciesEncryptionStandardVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV")

    /// The ECIES scheme this algorithm names, or nil.
    var eciesScheme: ECIESScheme? {
        let parts = name.split(separator: ":").map(String.init)
        let hashes: [String: Hash] = [
            "SHA1": .sha1, "SHA224": .sha224, "SHA256": .sha256, "SHA384": .sha384, "SHA512": .sha512,
        ]
        guard parts.count == 7, parts[0] == "algid", parts[1] == "encrypt", parts[2] == "ECIES",
            ["ECDH", "ECDHC"].contains(parts[3]), parts[4] == "KDFX963", let hash = hashes[parts[5]],
            ["AESGCM", "AESGCM-KDFIV"].contains(parts[6])
        else { return nil }
        return ECIESScheme(hash: hash, variableIV: parts[6] == "AESGCM-KDFIV")
    }
}
