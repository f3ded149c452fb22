import CSystemdBus
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A client connection to a message bus, through sd-bus: sd-bus authenticates (SASL EXTERNAL, as this
/// process's uid), says hello, and reads and checks every message; nothing here parses the bus's
/// bytes. An sd-bus connection may be used by one thread at a time, so every use takes the
/// connection's lock: a thread waiting in `receive` holds it until a message comes or its wait ends.
public final class DBusConnection: @unchecked Sendable {
    // The bus object is used only under `lock`; `functions` is a table of function pointers, read only.
    private let bus: OpaquePointer
    private let functions: keychain_sd_bus
    private let lock = Mutex<Void>(())
    public let uniqueName: String

    /// The system bus: `DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket.
    public static var systemBusAddress: String {
        getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
            ?? "unix:path=/var/run/dbus/system_bus_socket"
    }

    /// Connects to the bus at `address` (a D-Bus address, or several separated by `;`, the first that
    /// works), authenticates and says hello. `timeout` bounds the hello and every call's reply.
    /// `acceptingDescriptors`: whether peers may pass file descriptors (a service whose calls take
    /// one); without it the bus refuses such messages to this connection.
    public init(address: String, timeout: Duration = .seconds(5), acceptingDescriptors: Bool = false)
        throws(DBusError)
    {
        // A Unix socket only: its peer is known by the kernel's credentials. A TCP bus would make a
        // process on another machine a caller.
        guard address.split(separator: ";").allSatisfy({ $0.hasPrefix("unix:") }) else {
            throw DBusError(.connection, "only unix: bus addresses are used, not \(address)")
        }
        let functions = try SystemdBus.functions()
        var made: OpaquePointer?
        guard (functions.sd_bus_new?(&made) ?? -ENOSYS) >= 0, let bus = made else {
            throw DBusError(.connection, "cannot make a bus connection")
        }
        var code = address.withCString { functions.sd_bus_set_address?(bus, $0) ?? -ENOSYS }
        if code >= 0 { code = functions.sd_bus_set_bus_client?(bus, 1) ?? -ENOSYS }
        // Unless asked for, no descriptors are taken from anyone: a peer cannot make this process hold
        // its files.
        if code >= 0 { code = functions.sd_bus_negotiate_fds?(bus, acceptingDescriptors ? 1 : 0) ?? -ENOSYS }
        if code >= 0 { code = functions.sd_bus_set_method_call_timeout?(bus, Self.microseconds(timeout)) ?? -ENOSYS }
        if code >= 0 { code = functions.sd_bus_start?(bus) ?? -ENOSYS }
        var unique: UnsafePointer<CChar>?
        // The unique name comes with the bus's answer to the hello, which this waits for.
        if code >= 0 { code = functions.sd_bus_get_unique_name?(bus, &unique) ?? -ENOSYS }
        guard code >= 0, let unique, let name = String(validatingCString: unique) else {
            _ = functions.sd_bus_flush_close_unref?(bus)
            throw DBusError(
                code == -ETIMEDOUT ? .timedOut : .connection,
                "cannot connect to the bus at \(address): \(SystemdBus.describe(code < 0 ? code : -EPROTO))")
        }
        self.bus = bus
        self.functions = functions
        uniqueName = name
    }

    deinit { _ = functions.sd_bus_flush_close_unref?(bus) }

    private static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 1 }
        return UInt64(seconds) * 1_000_000 + UInt64(max(attoseconds, 0) / 1_000_000_000_000) + 1
    }

    /// Sends `message` (a call that wants no reply, a signal, or a reply or error to a call received
    /// here); returns its serial.
    @discardableResult
    public func send(_ message: DBusMessage) throws(DBusError) -> UInt64 {
        try lock.withLock { _ throws(DBusError) in
            let made = try message.making(on: bus, functions: functions)
            defer { _ = functions.sd_bus_message_unref?(made) }
            var cookie: UInt64 = 0
            let code = functions.sd_bus_send?(bus, made, &cookie) ?? -ENOSYS
            guard code >= 0 else {
                throw DBusError(.connection, "the bus connection failed: \(SystemdBus.describe(code))")
            }
            return cookie
        }
    }

    /// Sends a method call and waits for its reply; an error reply throws (`.errorReply`, with its
    /// name and text). Messages that arrive meanwhile wait for `receive`.
    public func call(_ message: DBusMessage, timeout: Duration = .seconds(5)) throws(DBusError) -> DBusMessage {
        try lock.withLock { _ throws(DBusError) in
            let made = try message.making(on: bus, functions: functions)
            defer { _ = functions.sd_bus_message_unref?(made) }
            var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
            defer { functions.sd_bus_error_free?(&error) }
            var reply: OpaquePointer?
            let code = functions.sd_bus_call?(bus, made, Self.microseconds(timeout), &error, &reply) ?? -ENOSYS
            defer { if let reply { _ = functions.sd_bus_message_unref?(reply) } }
            guard code >= 0, let reply else {
                if code == -ETIMEDOUT {
                    throw DBusError(.timedOut, "no reply to \(message.member ?? "a call") in time")
                }
                if let name = error.name.flatMap({ String(validatingCString: $0) }) {
                    let text = error.message.flatMap { String(validatingCString: $0) }.map { ": \($0)" } ?? ""
                    throw DBusError(.errorReply, name + text)
                }
                throw DBusError(.connection, "the bus connection failed: \(SystemdBus.describe(code))")
            }
            return try DBusMessage(reading: reply, functions: functions)
        }
    }

    /// The next message (a signal, or a call to this connection); nil when none came within `timeout`.
    /// A message that does not read is `.malformed`, and the next call reads on.
    public func receive(timeout: Duration) throws(DBusError) -> DBusMessage? {
        try lock.withLock { _ throws(DBusError) in
            let deadline = ContinuousClock.now + timeout
            while true {
                var message: OpaquePointer?
                let code = functions.sd_bus_process?(bus, &message) ?? -ENOSYS
                guard code >= 0 else {
                    throw DBusError(.connection, "the bus connection failed: \(SystemdBus.describe(code))")
                }
                if let message {
                    defer { _ = functions.sd_bus_message_unref?(message) }
                    return try DBusMessage(reading: message, functions: functions)
                }
                if code > 0 { continue }  // sd-bus handled something of its own
                let remaining = deadline - ContinuousClock.now
                guard remaining > .zero else { return nil }
                let waited = functions.sd_bus_wait?(bus, Self.microseconds(remaining)) ?? -ENOSYS
                guard waited >= 0 || waited == -EINTR else {
                    throw DBusError(.connection, "waiting on the bus failed: \(SystemdBus.describe(waited))")
                }
            }
        }
    }

    /// Adds a match rule: the bus then routes the signals it describes here.
    public func addMatch(_ rule: String) throws(DBusError) {
        _ = try call(
            .call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "AddMatch", body: [.string(rule)]))
    }

    /// The unique name of the connection that owns the well-known `name` now; nil when none does.
    public func nameOwner(_ name: String) throws(DBusError) -> String? {
        do {
            let reply = try call(
                .call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "GetNameOwner", body: [.string(name)]))
            return reply.body.first?.text
        } catch  where error.code == .errorReply {
            return nil  // org.freedesktop.DBus.Error.NameHasNoOwner
        }
    }

    /// Asks the bus for a well-known name; true when this connection is now its primary owner.
    public func requestName(_ name: String) throws(DBusError) -> Bool {
        let reply = try call(
            .call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RequestName", body: [.string(name), .uint32(4)]))  // 4: do not queue
        return reply.body.first == .uint32(1)
    }
}
