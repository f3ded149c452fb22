import KeychainCore

/// The access-group rules: which groups a client may write and read (errSecMissingEntitlement
/// otherwise). The token group is readable when entitled, never writable.
extension ClientIdentity {
    /// The group a new item goes to: the one named, if the client may write it, else its first.
    func groupForWriting(_ explicit: String?) throws -> String {
        let writable = writableGroups
        if let explicit {
            guard writable.contains(explicit) else {
                throw KeychainError.missingEntitlement(
                    "the access group \(explicit) is not one of this client's writable groups")
            }
            return explicit
        }
        guard let first = writable.first else {
            throw KeychainError.missingEntitlement("the client has no keychain access groups")
        }
        return first
    }

    /// The groups an update or delete may change: the one named, if writable, else every writable one.
    func groupsForWriting(_ explicit: String?) throws -> [String] {
        if let explicit { return [try groupForWriting(explicit)] }
        let writable = writableGroups
        guard !writable.isEmpty else {
            throw KeychainError.missingEntitlement("the client has no keychain access groups")
        }
        return writable
    }

    /// The groups a search may see: the one named, if the client has it, else all of the client's.
    func groupsForReading(_ explicit: String?) throws -> [String] {
        if let explicit {
            guard accessGroups.contains(explicit) else {
                throw KeychainError.missingEntitlement(
                    "the access group \(explicit) is not one of this client's groups")
            }
            return [explicit]
        }
        guard !accessGroups.isEmpty else {
            throw KeychainError.missingEntitlement("the client has no keychain access groups")
        }
        return accessGroups
    }
}
