import Foundation
import KeychainCore

/// Who may touch items, and in which access groups: a process whose executable is in its keychain's
/// app registry (by path and digest; by path alone only in development mode), with that entry's
/// groups. A general-purpose tool's reads of secrets and its changes wait for the user's approval.
/// Nothing the client sent about itself is consulted.
struct ItemAccessPolicy: Sendable {
    let development: Bool
    let tools: ToolRecognition

    /// What the policy grants one item request.
    struct Grant {
        let app: AppRegistration
        /// The identity the engine serves the request as: the entry's groups, the caller's contexts.
        let client: ClientIdentity
        /// The entry is a general-purpose tool and the request reads a secret or changes an item:
        /// the user must approve before it is served.
        let needsApproval: Bool
        /// Whether serving it counts as the keychain being in use (for the idle lock): a tool's
        /// request that needed no approval does not, or any process of the user could keep it awake.
        let keepsAwake: Bool
    }

    func grant(_ request: KeychainRequest, from caller: any PeerIdentity, registry: [AppRegistration])
        throws(KeychainError) -> Grant
    {
        let app = try registration(of: caller, in: registry)
        let isTool = try tools.isGeneralPurposeTool(app, caller: caller)
        let needsApproval = isTool && ToolRecognition.needsApproval(request)
        var client = app.identity
        client.contextScope = caller.contextScope
        return Grant(app: app, client: client, needsApproval: needsApproval, keepsAwake: !isTool || needsApproval)
    }

    /// The registry entry of the caller's executable; -34018 when it is not registered, has changed,
    /// or cannot be identified.
    func registration(of caller: any PeerIdentity, in registry: [AppRegistration]) throws(KeychainError)
        -> AppRegistration
    {
        try caller.executable.get().registration(in: registry, development: development).get()
    }
}
