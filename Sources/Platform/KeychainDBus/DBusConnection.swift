import Foundation
import KeychainBytes

#if canImport(Glibc)
    import Glibc
#endif

/// A client connection to a message bus: authenticated as this process's uid (SASL EXTERNAL), with a
/// unique name from the bus. Sending may happen from any thread; receiving (`receive`, `call`) from
/// one thread at a time.
public final class DBusConnection: @unchecked Sendable {
    // `sendLock` guards the serial counter and writes; `buffer` and `pending` belong to the one
    // receiving thread.
    private let descriptor: Int32
    private let sendLock = NSLock()
    private var lastSerial: UInt32 = 0
    private var buffer: [UInt8] = []
    /// Messages that arrived while a call waited for its reply, handed out by `receive` first.
    private var pending: [DBusMessage] = []
    public private(set) var uniqueName = ""

    /// The system bus: `DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket.
    public static var systemBusAddress: String {
        getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
            ?? "unix:path=/var/run/dbus/system_bus_socket"
    }

    /// Connects to the bus at `address` (a D-Bus address: `unix:path=…` or `unix:abstract=…`, the first
    /// of several separated by `;` that works), authenticates and says hello.
    public init(address: String, timeout: Duration = .seconds(5)) throws(DBusError) {
        var lastError = DBusError(.connection, "no usable address in \(address)")
        var connected: Int32 = -1
        for candidate in address.split(separator: ";") {
            do {
                connected = try Self.connect(String(candidate))
                break
            } catch {
                lastError = error
            }
        }
        guard connected >= 0 else { throw lastError }
        descriptor = connected
        do throws(DBusError) {
            try authenticate(timeout: timeout)
            let hello = try call(
                .call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "Hello"), timeout: timeout)
            guard let name = hello.body.first?.text else {
                throw DBusError(.connection, "the bus gave no unique name")
            }
            uniqueName = name
        } catch {
            // Every stored property is set by now: deinit closes the socket.
            throw error
        }
    }

    deinit { close(descriptor) }

    /// Sends `message`; returns the serial it was given.
    @discardableResult
    public func send(_ message: DBusMessage) throws(DBusError) -> UInt32 {
        sendLock.lock()
        defer { sendLock.unlock() }
        lastSerial &+= 1
        if lastSerial == 0 { lastSerial = 1 }
        let bytes = message.encoded(serial: lastSerial)
        guard bytes.count <= DBusMessage.maximumLength else {
            throw DBusError(.malformed, "a message over \(DBusMessage.maximumLength) bytes")
        }
        try writeAll(bytes)
        return lastSerial
    }

    /// Sends a method call and waits for its reply; an error reply throws (`.errorReply`). Messages
    /// that arrive meanwhile wait for `receive`.
    public func call(_ message: DBusMessage, timeout: Duration = .seconds(5)) throws(DBusError) -> DBusMessage {
        let serial = try send(message)
        let deadline = ContinuousClock.now + timeout
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero, let received = try read(timeout: remaining) else {
                throw DBusError(.timedOut, "no reply to \(message.member ?? "a call") in time")
            }
            guard received.replySerial == serial, received.kind == .methodReturn || received.kind == .error else {
                pending.append(received)
                continue
            }
            if received.kind == .error {
                let text = received.body.first?.text.map { ": \($0)" } ?? ""
                throw DBusError(.errorReply, (received.errorName ?? "an error") + text)
            }
            return received
        }
    }

    /// The next message (a signal, or a call to this connection); nil when none came within `timeout`.
    public func receive(timeout: Duration) throws(DBusError) -> DBusMessage? {
        if !pending.isEmpty { return pending.removeFirst() }
        return try read(timeout: timeout)
    }

    /// Drops the messages that arrived while calls waited for their replies (signals from before a
    /// point the caller cares about).
    public func discardPending() { pending.removeAll() }

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

    // MARK: Wire

    private static func connect(_ address: String) throws(DBusError) -> Int32 {
        guard address.hasPrefix("unix:") else { throw DBusError(.connection, "not a Unix address: \(address)") }
        var path: [UInt8]?
        for pair in address.dropFirst("unix:".count).split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let value = Array(unescape(parts[1]))
            if parts[0] == "path" { path = value }
            if parts[0] == "abstract" { path = [0] + value }
        }
        guard let path, !path.isEmpty else { throw DBusError(.connection, "no path in \(address)") }
        var socketAddress = sockaddr_un()
        guard path.count < MemoryLayout.size(ofValue: socketAddress.sun_path) else {
            throw DBusError(.connection, "the bus path is too long")
        }
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { raw in
            for (index, byte) in path.enumerated() { raw[index] = byte }
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw DBusError(.connection, "cannot make a socket (errno \(errno))") }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (path.first == 0 ? 0 : 1))
        let result = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, length) }
        }
        guard result == 0 else {
            let error = errno
            close(descriptor)
            throw DBusError(.connection, "cannot connect to \(address): \(String(cString: strerror(error)))")
        }
        return descriptor
    }

    /// Undoes the `%xx` escapes of an address value.
    private static func unescape(_ value: Substring) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = value.utf8.startIndex
        let utf8 = value.utf8
        while index < utf8.endIndex {
            if utf8[index] == UInt8(ascii: "%"), let first = utf8.index(index, offsetBy: 1, limitedBy: utf8.endIndex),
                let second = utf8.index(first, offsetBy: 1, limitedBy: utf8.endIndex), second < utf8.endIndex,
                let byte = Hex.decode(utf8: utf8[first...second]).flatMap(\.first)
            {
                bytes.append(byte)
                index = utf8.index(after: second)
            } else {
                bytes.append(utf8[index])
                index = utf8.index(after: index)
            }
        }
        return bytes
    }

    /// SASL EXTERNAL: the bus checks the uid the kernel gives for this socket against the one named.
    private func authenticate(timeout: Duration) throws(DBusError) {
        let uid = Hex.encode(String(getuid()).utf8)
        try writeAll([0] + Array("AUTH EXTERNAL \(uid)\r\n".utf8))
        let deadline = ContinuousClock.now + timeout
        var line: [UInt8] = []
        while !(line.count >= 2 && line.suffix(2) == [13, 10]) {
            guard line.count < 512 else { throw DBusError(.connection, "the bus sent an overlong line") }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero, try waitReadable(remaining) else {
                throw DBusError(.timedOut, "the bus did not answer the authentication")
            }
            var byte: UInt8 = 0
            let count = Glibc.read(descriptor, &byte, 1)
            if count < 0, errno == EINTR { continue }
            guard count == 1 else { throw DBusError(.connection, "the bus closed the connection while authenticating") }
            line.append(byte)
        }
        guard line.starts(with: Array("OK ".utf8)) else {
            throw DBusError(.connection, "the bus refused authentication as uid \(getuid())")
        }
        try writeAll(Array("BEGIN\r\n".utf8))
    }

    private func writeAll(_ bytes: [UInt8]) throws(DBusError) {
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw DBusError(.connection, "the bus connection failed (errno \(errno))")
            }
            written += count
        }
    }

    private func waitReadable(_ timeout: Duration) throws(DBusError) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let result = poll(&entry, 1, max(milliseconds, 1))
        if result < 0, errno != EINTR { throw DBusError(.connection, "waiting on the bus failed (errno \(errno))") }
        return result > 0
    }

    /// The next whole message from the socket, or nil after `timeout`.
    private func read(timeout: Duration) throws(DBusError) -> DBusMessage? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if buffer.count >= 16 {
                let total = try DBusMessage.length(ofMessageStartingWith: buffer[...])
                if buffer.count >= total {
                    let bytes = Array(buffer[..<total])
                    buffer.removeFirst(total)
                    return try DBusMessage(decoding: bytes)
                }
            }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero, try waitReadable(remaining) else { return nil }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw DBusError(.connection, "the bus closed the connection") }
            buffer.append(contentsOf: chunk[..<count])
        }
    }
}
