/// Why a D-Bus exchange failed: a code to compare, and a reason for people.
public struct DBusError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable, Equatable {
        /// The bytes are not a valid message (or exceed what this client accepts).
        case malformed
        /// The bus could not be reached, refused authentication, or closed the connection.
        case connection
        /// No answer came in time.
        case timedOut
        /// The peer answered a call with an error message (`reason` holds its name and text).
        case errorReply
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { reason }
}
