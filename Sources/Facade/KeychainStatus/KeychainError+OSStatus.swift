import KeychainCore

/// A keychain error as Apple's API reports it: the service's errors carry a code, and this is where a
/// code becomes the OSStatus a SecItem call returns (and the `security` command reports).
extension KeychainError {
    /// The OSStatus Apple's API returns for this error.
    public var osStatus: OSStatus {
        switch code {
        case .invalidParameter: errSecParam
        case .noSuchAttribute: errSecNoSuchAttr
        case .noSuchClass: errSecNoSuchClass
        case .duplicateItem: errSecDuplicateItem
        case .itemNotFound: errSecItemNotFound
        case .interactionNotAllowed: errSecInteractionNotAllowed
        case .notAvailable: errSecNotAvailable
        case .missingEntitlement: errSecMissingEntitlement
        case .unimplemented: errSecUnimplemented
        case .authenticationFailed: errSecAuthFailed
        case .userCanceled: errSecUserCanceled
        case .ioError: errSecIO
        case .readOnly: errSecReadOnly
        case .diskFull: errSecDiskFull
        case .allocationFailed: errSecAllocate
        case .internalError: errSecInternalComponent
        case .decode: errSecDecode
        }
    }
}
