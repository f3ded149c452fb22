import CSystemdBus
import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

// Messages to and from sd-bus's objects: sd-bus lays out, checks and parses the bytes; these only walk
// the values with its typed readers and writers.
extension DBusMessage {
    /// The message sd-bus received as `message` (which stays the caller's to release).
    init(reading message: OpaquePointer, functions: keychain_sd_bus) throws(DBusError) {
        var type: UInt8 = 0
        guard (functions.sd_bus_message_get_type?(message, &type) ?? -ENOSYS) >= 0, let kind = Kind(rawValue: type)
        else { throw DBusError(.malformed, "a message of an unknown type") }
        func text(_ value: UnsafePointer<CChar>?) -> String? { value.flatMap { String(validatingCString: $0) } }
        self.init(
            kind: kind, path: text(functions.sd_bus_message_get_path?(message)),
            interface: text(functions.sd_bus_message_get_interface?(message)),
            member: text(functions.sd_bus_message_get_member?(message)),
            destination: text(functions.sd_bus_message_get_destination?(message)))
        sender = text(functions.sd_bus_message_get_sender?(message))
        var cookie: UInt64 = 0
        if (functions.sd_bus_message_get_cookie?(message, &cookie) ?? -ENOSYS) >= 0 { serial = cookie }
        if (functions.sd_bus_message_get_reply_cookie?(message, &cookie) ?? -ENOSYS) >= 0 { replySerial = cookie }
        if kind == .error, let error = functions.sd_bus_message_get_error?(message) {
            errorName = text(error.pointee.name)
        }
        var reader = ValueReading(message: message, functions: functions)
        body = try reader.values()
        received = ReceivedMessage(message, functions: functions)
    }

    /// A new sd-bus message on `bus` with this message's header and body; the caller releases it.
    func making(on bus: OpaquePointer, functions: keychain_sd_bus) throws(DBusError) -> OpaquePointer {
        var made: OpaquePointer?
        let code: Int32
        switch kind {
        case .methodCall:
            code =
                functions.sd_bus_message_new_method_call?(bus, &made, destination, path, interface, member) ?? -ENOSYS
        case .signal:
            code = functions.sd_bus_message_new_signal?(bus, &made, path, interface, member) ?? -ENOSYS
        case .methodReturn:
            guard let call = answering else { throw DBusError(.malformed, "a reply to no call this connection had") }
            code = functions.sd_bus_message_new_method_return?(call.message, &made) ?? -ENOSYS
        case .error:
            guard let call = answering, let errorName else {
                throw DBusError(.malformed, "an error with no name, or to no call this connection had")
            }
            let text = body.first?.text ?? errorName
            code = errorName.withCString { name in
                text.withCString { text in
                    var error = sd_bus_error(name: name, message: text, _need_free: 0)
                    return functions.sd_bus_message_new_method_error?(call.message, &made, &error) ?? -ENOSYS
                }
            }
        }
        guard code >= 0, let made else {
            throw DBusError(.malformed, "sd-bus refused the message: \(SystemdBus.describe(code))")
        }
        do throws(DBusError) {
            if kind == .methodCall, noReplyExpected {
                _ = functions.sd_bus_message_set_expect_reply?(made, 0)
            }
            // A signal with a destination goes to that connection alone.
            if kind == .signal, let destination {
                let code = functions.sd_bus_message_set_destination?(made, destination) ?? -ENOSYS
                guard code >= 0 else {
                    throw DBusError(.malformed, "sd-bus refused the destination: \(SystemdBus.describe(code))")
                }
            }
            if kind != .error {
                var writer = ValueWriting(message: made, functions: functions)
                for value in body { try writer.append(value) }
            }
            return made
        } catch {
            _ = functions.sd_bus_message_unref?(made)
            throw error
        }
    }
}

/// Reads a message's values in order, containers and all.
private struct ValueReading {
    let message: OpaquePointer
    let functions: keychain_sd_bus
    /// Values still allowed in this message: a bus carries messages of up to 128 MiB, and one of tiny
    /// values would make millions of them here. A message with more is refused (`.malformed`) before
    /// it is built; no call of the keychain's needs a tenth of this.
    private var budget = DBusMessage.maximumValues

    init(message: OpaquePointer, functions: keychain_sd_bus) {
        self.message = message
        self.functions = functions
    }

    /// The values up to the end of the message or of the container entered.
    mutating func values() throws(DBusError) -> [DBusValue] {
        var values: [DBusValue] = []
        while let value = try next() {
            budget -= 1
            guard budget >= 0 else {
                throw DBusError(.malformed, "a message of more than \(DBusMessage.maximumValues) values")
            }
            values.append(value)
        }
        return values
    }

    private func check(_ code: Int32) throws(DBusError) {
        guard code >= 0 else {
            throw DBusError(.malformed, "a message that does not read: \(SystemdBus.describe(code))")
        }
    }

    private func basic<T>(_ type: UInt8, _ initial: T) throws(DBusError) -> T {
        var value = initial
        try check(
            withUnsafeMutablePointer(to: &value) {
                functions.sd_bus_message_read_basic?(message, CChar(type), $0) ?? -ENOSYS
            })
        return value
    }

    private func string(_ type: UInt8) throws(DBusError) -> String {
        let pointer: UnsafePointer<CChar>? = try basic(type, nil)
        guard let pointer, let text = String(validatingCString: pointer) else {
            throw DBusError(.malformed, "a string that is not UTF-8")
        }
        return text
    }

    /// The next value, or nil at the end of the message or of the container entered.
    private mutating func next() throws(DBusError) -> DBusValue? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        let peeked = functions.sd_bus_message_peek_type?(message, &type, &contents) ?? -ENOSYS
        try check(peeked)
        if peeked == 0 { return nil }
        switch UInt8(bitPattern: type) {
        case UInt8(ascii: "y"): return .byte(try basic(UInt8(ascii: "y"), UInt8(0)))
        case UInt8(ascii: "b"): return .boolean(try basic(UInt8(ascii: "b"), Int32(0)) != 0)
        case UInt8(ascii: "n"): return .int16(try basic(UInt8(ascii: "n"), Int16(0)))
        case UInt8(ascii: "q"): return .uint16(try basic(UInt8(ascii: "q"), UInt16(0)))
        case UInt8(ascii: "i"): return .int32(try basic(UInt8(ascii: "i"), Int32(0)))
        case UInt8(ascii: "u"): return .uint32(try basic(UInt8(ascii: "u"), UInt32(0)))
        case UInt8(ascii: "x"): return .int64(try basic(UInt8(ascii: "x"), Int64(0)))
        case UInt8(ascii: "t"): return .uint64(try basic(UInt8(ascii: "t"), UInt64(0)))
        case UInt8(ascii: "d"): return .double(try basic(UInt8(ascii: "d"), Double(0)))
        case UInt8(ascii: "s"): return .string(try string(UInt8(ascii: "s")))
        case UInt8(ascii: "o"): return .objectPath(try string(UInt8(ascii: "o")))
        case UInt8(ascii: "g"): return .signature(try string(UInt8(ascii: "g")))
        case UInt8(ascii: "h"):
            // The message owns the descriptor: a duplicate outlives it.
            let received = try basic(UInt8(ascii: "h"), Int32(-1))
            let duplicate = fcntl(received, F_DUPFD_CLOEXEC, 3)
            guard duplicate >= 0 else { throw DBusError(.malformed, "a descriptor that cannot be kept") }
            return .unixFD(DBusDescriptor(owning: duplicate))
        case UInt8(ascii: "a") where contents.map({ String(cString: $0) }) == "y":
            var pointer: UnsafeRawPointer?
            var size = 0
            try check(
                functions.sd_bus_message_read_array?(message, CChar(UInt8(ascii: "y")), &pointer, &size) ?? -ENOSYS)
            guard let pointer else { return .bytes(Data()) }
            return .bytes(Data(bytes: pointer, count: size))
        case UInt8(ascii: "a"), UInt8(ascii: "r"), UInt8(ascii: "e"), UInt8(ascii: "v"):
            guard let contents, let signature = String(validatingCString: contents) else {
                throw DBusError(.malformed, "a container without a signature")
            }
            try check(functions.sd_bus_message_enter_container?(message, type, contents) ?? -ENOSYS)
            let inner = try values()
            try check(functions.sd_bus_message_exit_container?(message) ?? -ENOSYS)
            switch UInt8(bitPattern: type) {
            case UInt8(ascii: "a"): return .array(element: signature, inner)
            case UInt8(ascii: "r"): return .structure(inner)
            case UInt8(ascii: "e"):
                guard inner.count == 2 else { throw DBusError(.malformed, "a dictionary entry of \(inner.count)") }
                return .dictEntry(key: inner[0], value: inner[1])
            default:
                guard inner.count == 1 else { throw DBusError(.malformed, "a variant of \(inner.count) values") }
                return .variant(inner[0])
            }
        default:
            throw DBusError(.malformed, "a value of the unknown type \(type)")
        }
    }
}

/// Appends values to a message being built.
private struct ValueWriting {
    let message: OpaquePointer
    let functions: keychain_sd_bus

    private func check(_ code: Int32) throws(DBusError) {
        guard code >= 0 else {
            throw DBusError(.malformed, "a value sd-bus refused: \(SystemdBus.describe(code))")
        }
    }

    private func basic<T>(_ type: UInt8, _ value: T) throws(DBusError) {
        var value = value
        try check(
            withUnsafePointer(to: &value) {
                functions.sd_bus_message_append_basic?(message, CChar(type), $0) ?? -ENOSYS
            })
    }

    private func string(_ type: UInt8, _ text: String) throws(DBusError) {
        // A string is passed as itself, not through a pointer to it.
        try check(text.withCString { functions.sd_bus_message_append_basic?(message, CChar(type), $0) ?? -ENOSYS })
    }

    private mutating func container(_ type: UInt8, _ contents: String, _ values: [DBusValue]) throws(DBusError) {
        try check(
            contents.withCString { functions.sd_bus_message_open_container?(message, CChar(type), $0) ?? -ENOSYS })
        for value in values { try append(value) }
        try check(functions.sd_bus_message_close_container?(message) ?? -ENOSYS)
    }

    mutating func append(_ value: DBusValue) throws(DBusError) {
        switch value {
        case .byte(let value): try basic(UInt8(ascii: "y"), value)
        case .boolean(let value): try basic(UInt8(ascii: "b"), Int32(value ? 1 : 0))
        case .int16(let value): try basic(UInt8(ascii: "n"), value)
        case .uint16(let value): try basic(UInt8(ascii: "q"), value)
        case .int32(let value): try basic(UInt8(ascii: "i"), value)
        case .uint32(let value): try basic(UInt8(ascii: "u"), value)
        case .int64(let value): try basic(UInt8(ascii: "x"), value)
        case .uint64(let value): try basic(UInt8(ascii: "t"), value)
        case .double(let value): try basic(UInt8(ascii: "d"), value)
        case .string(let text): try string(UInt8(ascii: "s"), text)
        case .objectPath(let text): try string(UInt8(ascii: "o"), text)
        case .signature(let text): try string(UInt8(ascii: "g"), text)
        case .unixFD: throw DBusError(.malformed, "descriptors are not sent")
        case .bytes(let data):
            try check(
                data.withUnsafeBytes { raw in
                    functions.sd_bus_message_append_array?(
                        message, CChar(UInt8(ascii: "y")), raw.baseAddress, raw.count)
                        ?? -ENOSYS
                })
        case .array(let element, let values): try container(UInt8(ascii: "a"), element, values)
        case .structure(let fields): try container(UInt8(ascii: "r"), fields.map(\.signature).joined(), fields)
        case .dictEntry(let key, let value):
            try container(UInt8(ascii: "e"), key.signature + value.signature, [key, value])
        case .variant(let inner): try container(UInt8(ascii: "v"), inner.signature, [inner])
        }
    }
}
