import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainDBus

#if canImport(Glibc)
    import Glibc
#endif

/// The portal backend (`org.freedesktop.impl.portal.Secret`): xdg-desktop-portal asks it for the
/// master secret of a sandboxed app (by the Flatpak app id the portal itself read), and libsecret in
/// that app keeps its own file keyring under that secret. So a Flatpak app needs no
/// `--talk-name=org.freedesktop.secrets`, and sees no other app's secrets.
///
/// Only the portal may ask: any other process could name any app id. The portal is the program
/// registered with the access group `org.freedesktop.impl.portal.Secret` (`security app register
/// /usr/libexec/xdg-desktop-portal --application-identifier org.freedesktop.portal.Desktop
/// --access-group org.freedesktop.impl.portal.Secret`), and the master secrets are items of that group.
extension SecretServiceServer {
    static let portalPath = "/org/freedesktop/portal/desktop"
    static let portalInterface = "org.freedesktop.impl.portal.Secret"
    /// The access group the master secrets live in, which only the registered portal has.
    static let portalGroup = "org.freedesktop.impl.portal.Secret"
    /// Bytes of a master secret.
    static let masterSecretSize = 64

    func portalCall(_ call: DBusMessage, as client: ClientIdentity) throws(SecretServiceError) -> [DBusValue] {
        guard call.member == "RetrieveSecret" else {
            throw SecretServiceError(.unknownMethod, "the portal backend has RetrieveSecret only")
        }
        guard call.signature == "osha{sv}", case .string(let appID) = call.body[1],
            case .unixFD(let descriptor) = call.body[2]
        else { throw SecretServiceError(.invalidArguments, "RetrieveSecret takes (osha{sv})") }
        guard client.accessGroups.contains(Self.portalGroup) else {
            throw SecretServiceError(
                .accessDenied, "only the registered portal (access group \(Self.portalGroup)) may retrieve app secrets")
        }
        // 0 is success, 2 an error (the portal's response codes): an app the portal could not name gets
        // no secret, nor one shared by every unsandboxed caller.
        guard Self.isAppID(appID) else { return [.uint32(2), .array(element: "{sv}", [])] }
        let secret: SecureBytes
        do {
            secret = try masterSecret(for: appID, client: client)
        } catch let error as KeychainError where error.code == .interactionNotAllowed {
            throw SecretServiceError(.isLocked, "the keychain is locked")
        } catch {
            DaemonLog.error("the portal's secret for \(appID) could not be had: \(error)")
            return [.uint32(2), .array(element: "{sv}", [])]
        }
        // Never waiting on the bus's thread: a descriptor that cannot take the secret at once (a full
        // pipe) gets the error response.
        let flags = fcntl(descriptor.descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor.descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else {
            return [.uint32(2), .array(element: "{sv}", [])]
        }
        let written = secret.withUnsafeBytes { bytes in Self.writeAll(bytes, to: descriptor.descriptor) }
        guard written else { return [.uint32(2), .array(element: "{sv}", [])] }
        return [.uint32(0), .array(element: "{sv}", [])]
    }

    /// The app's master secret: made (random) the first time, the same afterwards.
    private func masterSecret(for appID: String, client: ClientIdentity) throws -> SecureBytes {
        let key: [String: ItemValue] = [
            "class": .string("genp"), "svce": .string(Self.portalInterface), "acct": .string(appID),
            "agrp": .string(Self.portalGroup),
        ]
        var query = key
        query["r_Data"] = .bool(true)
        do {
            switch try tenant.keychain.copyMatching(query, client: client) {
            case .secret(let secret): return secret
            case .data(let data): return SecureBytes(copying: data)
            default: break
            }
        } catch let error as KeychainError where error.code == .itemNotFound {}
        let secret = try SecureBytes(randomCount: Self.masterSecretSize)
        var item = key
        item["labl"] = .string("Master secret of \(appID) (the Secret portal)")
        item["v_Data"] = .secret(secret)
        _ = try tenant.keychain.add(item, client: client)
        DaemonLog.info("made the portal's master secret for \(appID)")
        return secret
    }

    /// A Flatpak app id: a D-Bus name of at least two elements.
    static func isAppID(_ text: String) -> Bool {
        let elements = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.utf8.count <= 255 && elements.count >= 2
            && elements.allSatisfy { element in
                guard let first = element.utf8.first, !(0x30...0x39).contains(first) else { return false }
                return element.utf8.allSatisfy {
                    (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0)
                        || $0 == 0x5f || $0 == 0x2d
                }
            }
    }

    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = write(descriptor, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }
}
