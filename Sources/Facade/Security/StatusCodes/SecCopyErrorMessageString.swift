import Foundation

/// `SecCopyErrorMessageString`: Apple's English message for a status, or "OSStatus <n>" for a code
/// without one, as iOS answers.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    StatusMessages.message(for: status) as NSString
}
