import Foundation
import KeychainBytes
import KeychainCore

/// Stores secrets imported from another store as Secret Service items: each in the group of a
/// registered app its source named (gnome-keyring's access list, when it has one), else in the group
/// unregistered programs share, as they were visible to every program of the user before; in the
/// collection of the same label (made when missing), the default one for the source's default. A
/// secret already there (same collection, label, attributes and secret) is left out, so importing the
/// same file twice stores nothing twice.
struct SecretServiceImport {
    let daemon: KeychainDaemon
    let tenant: Tenant

    func store(_ secrets: [ImportedSecret]) throws(KeychainError) -> ImportReport {
        let registry = (try? daemon.registryEntries(of: tenant)) ?? []
        var report = ImportReport(imported: 0, skipped: [:])
        func skip(_ reason: String) { report.skipped[reason, default: 0] += 1 }
        for secret in secrets {
            let group =
                secret.applications.lazy.compactMap { path in
                    registry.first { $0.executablePath == path && !$0.isGeneralPurposeTool }?.identity.writableGroups
                        .first
                }.first ?? SecretServicePolicy.sharedAccessGroup
            let store = SecretServiceStore(keychain: tenant.keychain, client: ClientIdentity(accessGroups: [group]))
            do {
                let collection = try collectionID(labelled: secret.collection, creator: group)
                let present = try store.search(secret.attributes, collection: collection).contains { item in
                    item.label == secret.label && item.attributes == secret.attributes
                        && (try? store.secret(item.reference)) == secret.secret
                }
                if present {
                    skip("already present")
                    continue
                }
                _ = try store.create(
                    collection: collection, label: secret.label, attributes: secret.attributes, secret: secret.secret,
                    contentType: secret.contentType, replace: false)
                report.imported += 1
            } catch  where error.code == .invalidParameter {
                skip("refused: \(error.reason)")
            } catch  where error.code == .interactionNotAllowed {
                throw KeychainError.interactionNotAllowed("the keychain is locked: unlock it, then import again")
            }
        }
        return report
    }

    /// The collection labelled `label`: the default one for its label or none, else one made for it.
    private func collectionID(labelled label: String, creator: String) throws(KeychainError) -> String {
        if label.isEmpty || label.lowercased() == SecretServiceStore.defaultCollection {
            return SecretServiceStore.defaultCollection
        }
        return try daemon.engine {
            try tenant.secretService.change { document in
                if let found = document.collections.first(where: { $0.label == label }) { return found.id }
                return try document.addCollection(label: label, creator: creator)
            }
        }
    }
}
