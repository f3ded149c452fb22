import Security
import SecurityCommandCore

extension Failure {
    /// The same failure with the daemon's reason for the last SecItem call on this thread that failed
    /// (see `withServiceReason(last:)`).
    var withServiceReason: Failure { withServiceReason(last: SecItemFailure.lastOnThisThread) }
}
