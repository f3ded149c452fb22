import Foundation
import KeychainDBus
import Synchronization

/// Follows systemd-logind's sessions on the system bus and reports when one locks, as an iPhone locks
/// its keychain when its screen locks: the `Lock` signal (`loginctl lock-session`, or logind's own idle
/// and suspend handling) and the session's `LockedHint` turning true (what screen lockers set).
///
/// Only signals from the connection that owns `org.freedesktop.login1` count. The match rules name
/// that sender, but a signal addressed to this connection is delivered whatever the rules say, so each
/// signal's sender (which the bus sets, and no client can forge) is also compared with the name's
/// owner, followed through the bus's `NameOwnerChanged`. On the system bus only logind (root) may own
/// that name. An unlocked screen is not followed: the keychain opens again only with its passcode.
final class SessionLockFollower: Sendable {
    private let address: String
    private let stopping = Atomic<Bool>(false)
    /// Called with the uid of a session that locked, and why.
    private let onLock: @Sendable (uid_t, String) -> Void

    static let logind = "org.freedesktop.login1"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let bus = "org.freedesktop.DBus"

    init(address: String, onLock: @escaping @Sendable (uid_t, String) -> Void) {
        self.address = address
        self.onLock = onLock
    }

    /// Runs on a thread of its own until `stop`: connects (again every 10 s while the bus is away) and
    /// handles signals.
    func start() {
        let thread = Thread { [self] in run() }
        thread.start()
    }

    func stop() { stopping.store(true, ordering: .releasing) }

    private func run() {
        var reported: String?
        while !stopping.load(ordering: .acquiring) {
            do {
                let connection = try DBusConnection(address: address)
                try connection.addMatch(
                    "type='signal',sender='\(Self.logind)',interface='\(Self.sessionInterface)',member='Lock'")
                try connection.addMatch(
                    "type='signal',sender='\(Self.logind)',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='\(Self.sessionInterface)'"
                )
                try connection.addMatch(
                    "type='signal',sender='\(Self.bus)',interface='\(Self.bus)',member='NameOwnerChanged',arg0='\(Self.logind)'"
                )
                DaemonLog.info("following the login sessions' lock on the system bus")
                reported = nil
                try follow(connection)
            } catch {
                if reported != error.reason {
                    DaemonLog.warning(
                        "cannot follow the login sessions' lock: \(error.reason); trying again every 10 s")
                    reported = error.reason
                }
            }
            for _ in 0..<100 where !stopping.load(ordering: .acquiring) { usleep(100_000) }
        }
    }

    private func follow(_ connection: DBusConnection) throws(DBusError) {
        // Asked after the match rules are in, so that a change of owner from now on is seen.
        var logindOwner = try connection.nameOwner(Self.logind)
        var owners: [String: uid_t] = [:]
        while !stopping.load(ordering: .acquiring) {
            let message: DBusMessage?
            do {
                message = try connection.receive(timeout: .milliseconds(500))
            } catch  where error.code == .malformed {
                DaemonLog.warning("skipped a malformed message from the system bus: \(error.reason)")
                continue
            }
            guard let message, message.kind == .signal else { continue }
            if message.sender == Self.bus, message.interface == Self.bus, message.member == "NameOwnerChanged",
                message.body.count == 3, message.body[0].text == Self.logind
            {
                // logind restarted (or stopped): its sessions are asked about afresh.
                logindOwner = message.body[2].text.flatMap { $0.isEmpty ? nil : $0 }
                owners = [:]
                continue
            }
            guard let logindOwner, message.sender == logindOwner, let path = message.path,
                path.hasPrefix("/org/freedesktop/login1/session/")
            else { continue }
            let reason: String
            switch (message.interface, message.member) {
            case (Self.sessionInterface?, "Lock"?):
                reason = "its login session was locked"
            case ("org.freedesktop.DBus.Properties"?, "PropertiesChanged"?):
                guard message.body.count >= 2, message.body[0].text == Self.sessionInterface,
                    message.body[1].stringDictionary?["LockedHint"] == .variant(.boolean(true))
                else { continue }
                reason = "its login session's screen was locked"
            default:
                continue
            }
            if owners[path] == nil { owners[path] = try owner(of: path, on: connection) }
            guard let uid = owners[path] else { continue }
            onLock(uid, reason)
        }
    }

    /// The uid of the session at `path` (its `User` property, a uid and the user's object path).
    private func owner(of path: String, on connection: DBusConnection) throws(DBusError) -> uid_t? {
        let reply: DBusMessage
        do {
            reply = try connection.call(
                .call(
                    destination: Self.logind, path: path, interface: "org.freedesktop.DBus.Properties", member: "Get",
                    body: [.string(Self.sessionInterface), .string("User")]))
        } catch  where error.code == .errorReply {
            return nil  // a session that ended meanwhile
        }
        guard case .variant(.structure(let fields))? = reply.body.first, case .uint32(let uid)? = fields.first else {
            return nil
        }
        return uid
    }
}
