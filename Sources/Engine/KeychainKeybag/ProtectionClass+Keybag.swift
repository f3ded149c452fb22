import KeychainCore

extension ProtectionClass {
    /// Wrapped under the passcode (as well as the root) when a passcode is set.
    var isPasscodeProtected: Bool { tier != .always }
}
