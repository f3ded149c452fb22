import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainStorage

/// One read or update's answer to items whose access control guards their secret: the caller, the
/// authentication context it named, whether it allows asking the user, and the prompt's reason.
struct ItemAccess {
    let broker: AuthenticationBroker
    let client: ClientIdentity
    let context: AuthenticationContextReference?
    let reason: String
    let interactionAllowed: Bool
    /// `kSecUseAuthenticationUISkip`: an item that would need the user is left out instead.
    let skipWhenAsking: Bool

    /// - Parameter asking: false forbids asking whatever the query allows (a second pass that must
    ///   find everything already satisfied).
    init(
        query: Query, broker: AuthenticationBroker, client: ClientIdentity,
        context: AuthenticationContextReference? = nil, asking: Bool = true
    ) {
        self.broker = broker
        self.client = client
        self.context = context ?? query.authenticationContext
        reason = query.operationPrompt ?? self.context?.localizedReason ?? ""
        interactionAllowed = asking && query.interactionAllowed && !query.skipItemsNeedingAuthentication
        skipWhenAsking = query.skipItemsNeedingAuthentication
    }

    /// Opens the guarded secret into `record` once its access control is satisfied; false when the
    /// item is to be left out (it can never open again, or asking was skipped).
    ///
    /// The secret is opened before the user is asked, so that an item whose binding died (the enrolled
    /// set changed, the passcode was removed) is not found, without a prompt for nothing, as on iOS;
    /// it is handed out only after the constraint is satisfied. An item with an application password
    /// is the exception: its constraint comes first, so that the password is tested only for a caller
    /// who satisfied it (otherwise a wrong and a right password would answer differently without it).
    func open(_ row: StoredItem, record: inout ItemRecord, accessControl: AccessControlPolicy, classKey: SecureBytes)
        throws -> Bool
    {
        // The attributes, which are authenticated, say the secret is guarded: a secret blob that is not
        // (a rolled-back column) is corrupt, never handed out unasked.
        guard ItemCrypto.isGuarded(row.secret) else {
            KeychainLog.error(
                "an item's access control guards its secret but its secret blob is not guarded; skipping it")
            return false
        }
        let passwordFirst = accessControl.requiresApplicationPassword
        let boundSet = record.biometryBinding
        if passwordFirst, try !authorized(accessControl, boundSet: boundSet) { return false }
        let factors: SecretFactors
        do {
            factors = try broker.factors(for: accessControl, context: context, interactionAllowed: interactionAllowed)
        } catch let error as KeychainError where skipWhenAsking || error.code == .itemNotFound {
            // Skipping: an item that cannot be opened without the user is left out. Not found: bound to
            // an enrolled set or a passcode that is gone, and so is the item.
            return false
        }
        let secret: SecureBytes??
        do {
            secret = try ItemDecryption.openGuardedSecret(
                row, protection: record.protection, classKey: classKey, factors: factors)
        } catch {
            if accessControl.requiresApplicationPassword {
                throw KeychainError.authenticationFailed("the application password does not open the item")
            }
            return false  // the enrollment or passcode it was bound to is gone: never readable again
        }
        guard let secret else { return false }
        if !passwordFirst, try !authorized(accessControl, boundSet: boundSet) { return false }
        // The keychain may have locked while the user was asked: then the item is not available.
        guard broker.isAvailable(record.protection) else {
            throw KeychainError.interactionNotAllowed("the keychain locked while the user was asked")
        }
        record.secret = secret
        return true
    }

    /// Whether the access control is satisfied (asking where it must and may); false when asking is
    /// skipped (`kSecUseAuthenticationUISkip` leaves out every item that is not satisfied already).
    private func authorized(_ accessControl: AccessControlPolicy, boundSet: Data?) throws -> Bool {
        do {
            try broker.authorize(
                accessControl, context: context, client: client, reason: reason, interactionAllowed: interactionAllowed,
                boundSet: boundSet)
            return true
        } catch let error as KeychainError where skipWhenAsking && error.code != .ioError {
            return false
        }
    }
}
