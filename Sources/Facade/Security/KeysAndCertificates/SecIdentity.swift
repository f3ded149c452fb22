import Foundation
import KeychainCore
import KeychainCrypto

/// A certificate and its private key. Equal when both are.
public final class SecIdentity: SecObject, @unchecked Sendable {
    // Immutable.
    let certificate: SecCertificate
    let privateKey: SecKey

    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }

    override func isSame(as other: SecObject) -> Bool {
        guard let other = other as? SecIdentity else { return false }
        return certificate == other.certificate && privateKey == other.privateKey
    }

    public override func hash(into hasher: inout Hasher) { hasher.combine(certificate) }
}

public func SecIdentityCopyCertificate(
    _ identity: SecIdentity, _ certificate: UnsafeMutablePointer<SecCertificate?>
) -> OSStatus {
    certificate.pointee = identity.certificate
    return errSecSuccess
}

public func SecIdentityCopyPrivateKey(_ identity: SecIdentity, _ privateKey: UnsafeMutablePointer<SecKey?>) -> OSStatus
{
    privateKey.pointee = identity.privateKey
    return errSecSuccess
}

/// Opens a PKCS#12 file with `kSecImportExportPassphrase`: one dictionary with the identity
/// (`kSecImportItemIdentity`), the other certificates (`kSecImportItemCertChain`, the identity's first),
/// its label and key identifier. A wrong password → errSecAuthFailed; data that is no PKCS#12 →
/// errSecDecode. Nothing is added to the keychain (as on Apple's platforms).
public func SecPKCS12Import(
    _ pkcs12Data: CFData, _ options: CFDictionary, _ items: UnsafeMutablePointer<CFArray?>
) -> OSStatus {
    let values = (try? ValueBridging.dictionary(options)) ?? [:]
    var password = ""
    if case .string(let given)? = values["passphrase"] { password = given }
    let bundle: PKCS12Bundle
    do {
        bundle = try PKCS12Bundle.open(pkcs12Data.contiguousData, password: password)
    } catch .wrongPassword {
        return errSecAuthFailed
    } catch .malformed {
        return errSecDecode
    } catch {
        return errSecUnimplemented
    }
    let certificate = SecCertificate(bundle.certificate)
    let identity = SecIdentity(certificate: certificate, privateKey: SecKey(key: bundle.key))
    let item = NSMutableDictionary()
    item["identity"] = identity
    item["chain"] = NSArray(array: [certificate] + bundle.chain.map(SecCertificate.init))
    if let label = bundle.label { item["label"] = label as NSString }
    if let publicKey = try? bundle.key.publicRepresentation(), let keyID = try? Digest.sha1(publicKey) {
        item["keyid"] = keyID as NSData
    }
    items.pointee = NSArray(array: [item])
    return errSecSuccess
}
