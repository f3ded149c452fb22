import Foundation
import KeychainCore

/// The keychain's reason for the last SecItem call on this thread that failed with a keychain error.
///
/// Apple's API returns only the status, and -34018 from a daemon has several causes (an executable it
/// does not know, or one it knows but will not trust as it runs: dumpable, a loader variable, traced,
/// foreign code), as -25291 has (a daemon that is not running, or that did not answer). The `security`
/// command reads this to name the cause; it is kept per thread so that another thread's call cannot
/// stand in for this one's, and overwritten by each failure, so a reader checks the status it got.
package enum SecItemFailure {
    private static let key = "swift-keychain.SecItemFailure.last"

    private final class Record {
        let status: OSStatus
        let reason: String

        init(status: OSStatus, reason: String) {
            self.status = status
            self.reason = reason
        }
    }

    /// The status and reason of this thread's last failed SecItem call, if one failed with a keychain error.
    package static var lastOnThisThread: (status: OSStatus, reason: String)? {
        guard let record = Thread.current.threadDictionary[key] as? Record else { return nil }
        return (record.status, record.reason)
    }

    package static func record(_ error: KeychainError) {
        Thread.current.threadDictionary[key] = Record(status: error.osStatus, reason: error.reason)
    }
}
