/// One D-Bus message: its kind, the header fields that route it, and its body.
public struct DBusMessage: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case methodCall = 1
        case methodReturn = 2
        case error = 3
        case signal = 4
    }

    /// Flag: the caller wants no reply.
    public static let noReplyExpected: UInt8 = 0x1

    public var kind: Kind
    public var flags: UInt8 = 0
    /// Set by the connection when it sends the message.
    public var serial: UInt32 = 0
    public var path: String?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var replySerial: UInt32?
    public var destination: String?
    /// Set by the bus: the unique name of the connection that sent the message.
    public var sender: String?
    public var body: [DBusValue] = []

    /// The largest message this client sends or accepts (logind's are a few hundred bytes; the
    /// specification allows 128 MiB).
    public static let maximumLength = 1 << 20

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

    /// The reply to `call`, carrying `body`.
    public static func reply(to call: DBusMessage, body: [DBusValue] = []) -> DBusMessage {
        var reply = DBusMessage(kind: .methodReturn, destination: call.sender, body: body)
        reply.replySerial = call.serial
        reply.flags = noReplyExpected
        return reply
    }

    /// The body's signature.
    public var signature: String { body.map(\.signature).joined() }

    private enum Field: UInt8 {
        case path = 1
        case interface, member, errorName, replySerial, destination, sender, signature
    }

    /// The message as it goes on the wire (little-endian), with `serial`.
    public func encoded(serial: UInt32) -> [UInt8] {
        var fields: [DBusValue] = []
        func add(_ field: Field, _ value: DBusValue?) {
            if let value { fields.append(.structure([.byte(field.rawValue), .variant(value)])) }
        }
        add(.path, path.map(DBusValue.objectPath))
        add(.interface, interface.map(DBusValue.string))
        add(.member, member.map(DBusValue.string))
        add(.errorName, errorName.map(DBusValue.string))
        add(.replySerial, replySerial.map(DBusValue.uint32))
        add(.destination, destination.map(DBusValue.string))
        add(.sender, sender.map(DBusValue.string))
        if !body.isEmpty { add(.signature, .signature(signature)) }

        var bodyWriter = DBusWriter()
        for value in body { bodyWriter.write(value) }
        var writer = DBusWriter()
        writer.write(.byte(UInt8(ascii: "l")))
        writer.write(.byte(kind.rawValue))
        writer.write(.byte(flags))
        writer.write(.byte(1))
        writer.append(UInt32(bodyWriter.bytes.count))
        writer.append(serial)
        writer.write(.array(element: "(yv)", fields))
        writer.pad(to: 8)
        return writer.bytes + bodyWriter.bytes
    }

    /// How many bytes the message whose first 16 bytes are `header` takes in all.
    public static func length(ofMessageStartingWith header: ArraySlice<UInt8>) throws(DBusError) -> Int {
        guard header.count >= 16 else { throw DBusError(.malformed, "a message header is shorter than 16 bytes") }
        let bytes = Array(header.prefix(16))
        guard bytes[0] == UInt8(ascii: "l") || bytes[0] == UInt8(ascii: "B") else {
            throw DBusError(.malformed, "a message of unknown byte order")
        }
        var reader = DBusReader(bytes: bytes, bigEndian: bytes[0] == UInt8(ascii: "B"), offset: 4)
        let bodyLength = Int(try reader.integer(UInt32.self))
        reader.offset = 12
        let fieldsLength = Int(try reader.integer(UInt32.self))
        guard bodyLength <= maximumLength, fieldsLength <= maximumLength else {
            throw DBusError(.malformed, "a message over \(maximumLength) bytes")
        }
        let total = (16 + fieldsLength + 7) / 8 * 8 + bodyLength
        guard total <= maximumLength else { throw DBusError(.malformed, "a message over \(maximumLength) bytes") }
        return total
    }

    /// Decodes one whole message.
    public init(decoding bytes: [UInt8]) throws(DBusError) {
        let total = try Self.length(ofMessageStartingWith: bytes[...])
        guard bytes.count == total else { throw DBusError(.malformed, "a message's length does not match its header") }
        guard let kind = Kind(rawValue: bytes[1]) else {
            throw DBusError(.malformed, "a message of unknown kind \(bytes[1])")
        }
        guard bytes[3] == 1 else { throw DBusError(.malformed, "a message of protocol version \(bytes[3])") }
        self.kind = kind
        flags = bytes[2]
        var reader = DBusReader(bytes: bytes, bigEndian: bytes[0] == UInt8(ascii: "B"), offset: 4)
        let bodyLength = Int(try reader.integer(UInt32.self))
        serial = try reader.integer(UInt32.self)
        guard case .array(_, let fields) = try reader.read("a(yv)") else {
            throw DBusError(.malformed, "a message without header fields")
        }
        try reader.skipPadding(to: 8)
        guard reader.offset + bodyLength == bytes.count else {
            throw DBusError(.malformed, "a message's body does not end with it")
        }
        var signature = ""
        for field in fields {
            guard case .structure(let parts) = field, parts.count == 2, case .byte(let code) = parts[0],
                case .variant(let value) = parts[1]
            else { throw DBusError(.malformed, "a header field is not a code and a variant") }
            switch (Field(rawValue: code), value) {
            case (.path?, .objectPath(let text)): path = text
            case (.interface?, .string(let text)): interface = text
            case (.member?, .string(let text)): member = text
            case (.errorName?, .string(let text)): errorName = text
            case (.replySerial?, .uint32(let number)): replySerial = number
            case (.destination?, .string(let text)): destination = text
            case (.sender?, .string(let text)): sender = text
            case (.signature?, .signature(let text)): signature = text
            case (nil, _): continue  // unknown fields are ignored, as the specification says
            default: throw DBusError(.malformed, "header field \(code) has the wrong type")
            }
        }
        var values: [DBusValue] = []
        for type in try DBusSignature.completeTypes(signature) {
            values.append(try reader.read(Substring(type)))
        }
        guard reader.offset == bytes.count else {
            throw DBusError(.malformed, "a message's body is longer than its values")
        }
        body = values
    }
}
