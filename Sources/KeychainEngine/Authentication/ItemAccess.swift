import Foundation
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

    init(query: Query, broker: AuthenticationBroker, client: ClientIdentity) {
        self.broker = broker
        self.client = client
        context = query.authenticationContext
        reason = query.operationPrompt ?? query.authenticationContext?.localizedReason ?? ""
        interactionAllowed = query.interactionAllowed && !query.skipItemsNeedingAuthentication
        skipWhenAsking = query.skipItemsNeedingAuthentication
    }

    /// Opens the guarded secret into `record` once its access control is satisfied; false when the
    /// item is to be left out (it can never open again, or asking was skipped).
    ///
    /// The secret is opened before the user is asked, so that an item whose biometry binding died (the
    /// enrolled set changed) is not found, without a prompt for nothing, as on iOS; it is handed out
    /// only after the constraint is satisfied.
    func open(_ row: StoredItem, record: inout ItemRecord, accessControl: AccessControlPolicy, classKey: SecureBytes)
        throws -> Bool
    {
        let factors: SecretFactors
        do {
            factors = try broker.factors(for: accessControl, context: context, interactionAllowed: interactionAllowed)
        } catch let error as KeychainError where skipWhenAsking && error.code == .interactionNotAllowed {
            return false
        } catch let error as KeychainError where error.code == .itemNotFound {
            return false  // bound to an enrolled set or a passcode that is gone: so is the item
        }
        let secret: Data??
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
        do {
            try broker.authorize(
                accessControl, context: context, client: client, reason: reason, interactionAllowed: interactionAllowed)
        } catch let error as KeychainError where skipWhenAsking && error.code == .interactionNotAllowed {
            return false
        }
        record.secret = secret
        return true
    }
}
