/// Why a sync step failed: a code the other end and the tests compare, and a reason for people.
///
/// The codes travel in the server's answers (as their raw values), so they never change meaning.
public struct SyncError: Error, Equatable, CustomStringConvertible, Sendable {
    public enum Code: UInt16, Sendable {
        /// Bytes that are not what the protocol says (from either end).
        case malformed = 1
        /// The device did not prove it holds the key it named.
        case unauthenticated = 2
        /// No account by that name on this server.
        case noAccount = 3
        /// An account by that name exists already.
        case accountExists = 4
        /// The recovery secret given is not the account's (the guess is counted).
        case recoveryRejected = 5
        /// Too many wrong recovery secrets: the server refuses every further guess for this account.
        case recoveryLocked = 6
        /// The device is not (yet) in the account's trusted set.
        case notTrusted = 7
        /// The device was removed from the account: the server refuses it.
        case removed = 8
        /// A record changed on the server since the device read it: read again and re-apply.
        case conflict = 9
        /// A trust view that does not follow the account's latest one.
        case staleView = 10
        /// Something signed or sealed does not verify: a forgery, a swap, or damage.
        case forged = 11
        /// The server showed this device a history another trusted device did not see.
        case forked = 12
        /// The server gave back a version this device has already seen superseded.
        case replayed = 13
        /// The server left out part of the log.
        case withheld = 14
        /// The server (or its database) failed; the step can be tried again.
        case server = 15
        /// The server could not be reached or the connection dropped.
        case unavailable = 16
        /// This keychain is not enrolled in an account.
        case notEnrolled = 17
        /// The keychain is locked and the step needs keys of a class it holds.
        case locked = 18
        /// A request the caller may not make, or a value out of bounds.
        case invalid = 19
        /// An answer would not fit in one message: ask for less.
        case tooLarge = 20
        /// The server's limits refuse it: an account's quota, new accounts an hour, waiting devices.
        case limited = 21
        /// The log was dropped up to a checkpoint past the position asked from: start from it.
        case compacted = 22
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { reason }

    public static func == (lhs: SyncError, rhs: SyncError) -> Bool { lhs.code == rhs.code }
}
