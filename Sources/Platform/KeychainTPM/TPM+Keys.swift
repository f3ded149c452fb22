import CTSS2
import Foundation
import KeychainBytes

/// P-256 keys made inside the TPM: the private key never leaves the chip (`fixedTPM | fixedParent`,
/// made by the chip itself), and is usable only through this TPM's primary. The keychain keeps the
/// marshalled object (its private part encrypted by the primary) and asks the chip to sign or to run
/// the ECDH step; who may ask is the keychain's access control, checked before.
extension TPM {
    /// Makes a key; returns its public key (ANSI X9.63, `04 ‖ X ‖ Y`) and the object to load it again.
    public func createKey() throws -> (publicKey: Data, object: TPMSealedObject) {
        try run("creating a key in the TPM") { context, primary in
            var template = Self.eccTemplate(
                attributes: TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT, childrenEncryptedWithAES: false)
            var sensitive = TPM2B_SENSITIVE_CREATE()
            let session = try Self.startSession(
                context, primary: primary, type: TPM2_SE(TPM2_SE_HMAC),
                attributes: TPMA_SESSION(TPMA_SESSION_CONTINUESESSION))
            defer { Self.flush(context, session) }
            let made = try Self.createObject(
                context, primary: primary, session: session, sensitive: &sensitive, template: &template,
                "creating a key in the TPM")
            let point = made.publicArea.unique.ecc
            let x = TPMBuffers.data(point.x.buffer, size: point.x.size)
            let y = TPMBuffers.data(point.y.buffer, size: point.y.size)
            guard x.count == 32, y.count == 32 else { throw TPMError(.failed, "the TPM made a key of another size") }
            return (Data([4]) + x + y, made.object)
        }
    }

    /// An ECDSA signature of `digest` (at most 64 bytes, cut to the curve's size by the chip as ECDSA
    /// does) by the key `object`: its r and s, 32 bytes each.
    public func sign(_ object: TPMSealedObject, digest: Data) throws -> (r: Data, s: Data) {
        guard (20...64).contains(digest.count) else { throw TPMError(.failed, "a digest of \(digest.count) bytes") }
        let hash: UInt16 =
            switch digest.count {
            case 20: UInt16(TPM2_ALG_SHA1)
            case 48: UInt16(TPM2_ALG_SHA384)
            case 64: UInt16(TPM2_ALG_SHA512)
            default: UInt16(TPM2_ALG_SHA256)
            }
        // The TPM wants a digest as long as its scheme's hash: other lengths are cut or padded as
        // ECDSA itself would (leftmost bits of the curve's size).
        var input = digest
        if ![20, 32, 48, 64].contains(digest.count) {
            input = digest.count > 32 ? digest.prefix(32) : Data(count: 32 - digest.count) + digest
        }
        return try withLoadedObject(object, "signing in the TPM") { context, _, handle in
            var value = TPM2B_DIGEST()
            try TPMBuffers.fill(&value.buffer, size: &value.size, from: input)
            var scheme = TPMT_SIG_SCHEME()
            scheme.scheme = TPM2_ALG_ID(TPM2_ALG_ECDSA)
            scheme.details.ecdsa.hashAlg = TPM2_ALG_ID(hash)
            var validation = TPMT_TK_HASHCHECK()
            validation.tag = TPM2_ST(TPM2_ST_HASHCHECK)
            validation.hierarchy = TPMI_RH_HIERARCHY(TPM2_RH_NULL)
            var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
            try Self.check(
                Esys_Sign(
                    context, handle, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &value,
                    &scheme, &validation, &signature),
                "signing in the TPM")
            defer { Esys_Free(signature) }
            guard let signature else { throw TPMError(.failed, "the TPM returned no signature") }
            let ecdsa = signature.pointee.signature.ecdsa
            return (
                TPMBuffers.data(ecdsa.signatureR.buffer, size: ecdsa.signatureR.size),
                TPMBuffers.data(ecdsa.signatureS.buffer, size: ecdsa.signatureS.size)
            )
        }
    }

    /// The ECDH shared secret (the X coordinate of d·Q) of the key `object` with the peer's public key
    /// (`04 ‖ X ‖ Y`); the answer is encrypted on the bus.
    public func sharedSecret(_ object: TPMSealedObject, peer: Data) throws -> SecureBytes {
        guard peer.count == 65, peer.first == 4 else { throw TPMError(.failed, "the peer key is not a P-256 point") }
        return try withLoadedObject(object, "a key exchange in the TPM") { context, primary, handle in
            var point = TPM2B_ECC_POINT()
            try TPMBuffers.fill(&point.point.x.buffer, size: &point.point.x.size, from: peer.dropFirst().prefix(32))
            try TPMBuffers.fill(&point.point.y.buffer, size: &point.point.y.size, from: peer.suffix(32))
            let session = try Self.startSession(
                context, primary: primary, type: TPM2_SE(TPM2_SE_HMAC),
                attributes: TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT))
            defer { Self.flush(context, session) }
            var out: UnsafeMutablePointer<TPM2B_ECC_POINT>?
            try Self.check(
                Esys_ECDH_ZGen(context, handle, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &point, &out),
                "a key exchange in the TPM")
            defer {
                if let out { TPMBuffers.wipe(&out.pointee) }
                Esys_Free(out)
            }
            guard let out else { throw TPMError(.failed, "the TPM returned no shared secret") }
            return TPMBuffers.secure(out.pointee.point.x.buffer, size: out.pointee.point.x.size)
        }
    }
}
