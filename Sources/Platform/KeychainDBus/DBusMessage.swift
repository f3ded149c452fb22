import CSystemdBus

/// One D-Bus message: its kind, the header fields that route it, and its body. Messages are built and
/// read by sd-bus (`DBusConnection`), which checks every one against the specification; this is the
/// keychain's view of one.
public struct DBusMessage: Sendable {
    public enum Kind: UInt8, Sendable {
        case methodCall = 1
        case methodReturn = 2
        case error = 3
        case signal = 4
    }

    public var kind: Kind
    /// The sender's serial number for the message (sd-bus's cookie): a sender numbers its messages in
    /// the order it sends them, replies and signals alike. Set when a message is received.
    public internal(set) var serial: UInt64 = 0
    public var path: String?
    public var interface: String?
    public var member: String?
    /// An error's name (`org.freedesktop.DBus.Error.…`, or the service's own).
    public var errorName: String?
    /// The serial of the call a reply or an error answers.
    public internal(set) var replySerial: UInt64?
    public var destination: String?
    /// Set by the bus: the unique name of the connection that sent the message.
    public internal(set) var sender: String?
    public var body: [DBusValue] = []
    /// Whether a call expects no reply.
    public var noReplyExpected = false
    /// The call a reply or an error answers, as sd-bus received it (a reply is built from it).
    var answering: ReceivedMessage?
    /// The message as sd-bus received it: set on received messages only.
    var received: ReceivedMessage?

    public init(
        kind: Kind, path: String? = nil, interface: String? = nil, member: String? = nil,
        destination: String? = nil, body: [DBusValue] = []
    ) {
        self.kind = kind
        self.path = path
        self.interface = interface
        self.member = member
        self.destination = destination
        self.body = body
    }

    /// A method call.
    public static func call(
        destination: String, path: String, interface: String, member: String, body: [DBusValue] = []
    ) -> DBusMessage {
        DBusMessage(
            kind: .methodCall, path: path, interface: interface, member: member, destination: destination, body: body)
    }

    /// A signal.
    public static func signal(path: String, interface: String, member: String, body: [DBusValue] = []) -> DBusMessage {
        DBusMessage(kind: .signal, path: path, interface: interface, member: member, body: body)
    }

    /// The reply to `call` (a method call this connection received), carrying `body`.
    public static func reply(to call: DBusMessage, body: [DBusValue] = []) -> DBusMessage {
        var reply = DBusMessage(kind: .methodReturn, destination: call.sender, body: body)
        reply.answering = call.received
        return reply
    }

    /// The error answer to `call`: the error's name and a message for people.
    public static func error(to call: DBusMessage, name: String, message: String) -> DBusMessage {
        var error = DBusMessage(kind: .error, destination: call.sender, body: [.string(message)])
        error.errorName = name
        error.answering = call.received
        return error
    }

    /// The most values a received message may hold, containers and their contents all told (a byte
    /// array counts once).
    public static let maximumValues = 262_144

    /// The body's signature.
    public var signature: String { body.map(\.signature).joined() }
}

/// A message sd-bus received, held (one reference) for as long as a reply to it may be built.
final class ReceivedMessage: @unchecked Sendable {
    // sd-bus message objects are reference counted with atomic counts; this one is only read (to build
    // a reply from) while a connection's lock is held.
    let message: OpaquePointer
    private let functions: keychain_sd_bus

    init(_ message: OpaquePointer, functions: keychain_sd_bus) {
        self.message = message
        self.functions = functions
        _ = functions.sd_bus_message_ref?(message)
    }

    deinit { _ = functions.sd_bus_message_unref?(message) }
}
