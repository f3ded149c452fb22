import Foundation

/// `SecCopyErrorMessageString`: Apple's English message for a status, or "OSStatus <n>" for a code
/// without one, as iOS answers.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    SecErrorMessages.message(for: status) as NSString
}

enum SecErrorMessages {
    static func message(for status: OSStatus) -> String {
        table[status] ?? "OSStatus \(status)"
    }

    // The English strings Security.framework ships for the codes keychain clients meet.
    private static let table: [OSStatus: String] = [
        0: "No error.",
        -4: "Function or operation not implemented.",
        -34: "The disk is full.",
        -36: "I/O error.",
        -49: "File already open with write permission.",
        -50: "One or more parameters passed to a function were not valid.",
        -61: "Write permissions error.",
        -108: "Failed to allocate memory.",
        -128: "User canceled the operation.",
        -909: "Bad parameter or invalid state for operation.",
        -25243: "The specified item has no access control.",
        -25244: "Invalid attempt to change the owner of this item.",
        -25291: "No keychain is available. You may need to restart your computer.",
        -25292: "This keychain cannot be modified.",
        -25293: "The user name or passphrase you entered is not correct.",
        -25299: "The specified item already exists in the keychain.",
        -25300: "The specified item could not be found in the keychain.",
        -25303: "The specified attribute does not exist.",
        -25304: "The specified item is no longer valid. It may have been deleted from the keychain.",
        -25306: "The specified item does not appear to be a valid keychain item.",
        -25308: "User interaction is not allowed.",
        -25309: "The specified attribute could not be modified.",
        -25311: "This item specifies a key size which is too large or too small.",
        -25315: "User interaction is required, but is currently not allowed.",
        -25316: "The contents of this item cannot be retrieved.",
        -25320: "In dark wake, no UI possible",
        -26275: "Unable to decode the provided data.",
        -34018: "A required entitlement isn't present.",
        -34020: "Client is restricted and is not permitted to perform this operation.",
    ]
}
