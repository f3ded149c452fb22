import Foundation
import KeychainBytes
import KeychainCore
import KeychainDBus
import KeychainTestSupport
import Synchronization
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// `--follow-session-lock`: a login session that locks locks its user's keychain, as an iPhone's
/// screen lock does. A private `dbus-daemon` stands in for the system bus and a connection of the
/// test's, owning `org.freedesktop.login1`, for systemd-logind.
final class SessionLockTests: XCTestCase {
    func testALockedSessionLocksItsUsersKeychainForEveryClient() throws {
        let bus = try TestBus()
        let logind = try FakeLogind(bus: bus, uid: getuid())
        defer { logind.stop() }
        let daemon = try TestDaemon(
            arguments: ["--follow-session-lock"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        try waitUntilFollowing(daemon)
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        try daemon.register(executable: app, identifier: "TEAM.a", groups: ["TEAM.a"])
        let service = daemon.service()
        try service.setPasscode(SecureBytesHelper.bytes("2468"), current: nil)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "mail", "me", "class-a", "", "ak"], daemon: daemon).output, "status 0")

        // `loginctl lock-session`: logind's Lock signal on the session's object.
        try logind.emitLock()
        try waitForLockState(.locked, of: service)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "status -25308")
        XCTAssertEqual(logind.userQueries, 1, "the session's owner is asked of logind")
        XCTAssertTrue(daemon.log.contains("its login session was locked"), daemon.log)

        // The screen unlocking does not open the keychain: only its passcode does.
        try logind.emitLockedHint(false)
        try service.unlock(passcode: SecureBytesHelper.bytes("2468"))
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "class-a")

        // A screen locker setting the session's LockedHint locks it too; the owner is remembered.
        try logind.emitLockedHint(true)
        try waitForLockState(.locked, of: service)
        XCTAssertEqual(logind.userQueries, 1)
    }

    func testOnlyLogindsSignalsCountAndOtherUsersSessionsAreIgnored() throws {
        let bus = try TestBus()
        let daemon = try TestDaemon(
            arguments: ["--follow-session-lock"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        try waitUntilFollowing(daemon)
        let service = daemon.service()
        try service.setPasscode(SecureBytesHelper.bytes("2468"), current: nil)

        // logind itself, with a session of another uid: a user-mode daemon serves only its own user.
        let logind = try FakeLogind(bus: bus, uid: getuid() &+ 1)
        defer { logind.stop() }
        // A connection that does not own logind's name signals a session of this uid, broadcast (the
        // daemon's match rules name logind as the sender) and addressed to every connection on the bus
        // (delivered whatever the rules say; the daemon compares the sender with the name's owner).
        let forged = "/org/freedesktop/login1/session/c9"
        logind.addSession(forged, uid: getuid())
        let impostor = try DBusConnection(address: bus.address)
        try impostor.send(.signal(path: forged, interface: "org.freedesktop.login1.Session", member: "Lock"))
        let names = try impostor.call(
            .call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "ListNames"))
        guard case .array(_, let listed)? = names.body.first else { return XCTFail("no names listed") }
        let others = listed.compactMap(\.text).filter { $0.hasPrefix(":") && $0 != impostor.uniqueName }
        XCTAssertGreaterThanOrEqual(others.count, 2, "the daemon and logind are on the bus")
        for name in others {
            var signal = DBusMessage.signal(path: forged, interface: "org.freedesktop.login1.Session", member: "Lock")
            signal.destination = name
            try impostor.send(signal)
            var hint = DBusMessage.signal(
                path: forged, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                body: [
                    .string("org.freedesktop.login1.Session"),
                    .array(element: "{sv}", [.dictEntry(key: .string("LockedHint"), value: .variant(.boolean(true)))]),
                    .array(element: "s", []),
                ])
            hint.destination = name
            try impostor.send(hint)
        }
        try logind.emitLock()
        try waitUntil { logind.userQueries >= 1 }
        usleep(300_000)
        XCTAssertEqual(logind.userQueries, 1, "only logind's own signal was followed")
        XCTAssertEqual(try service.status().lockState, .unlocked)

        // The same session signalled by logind: the follower was listening all along.
        try logind.emitLock(path: forged)
        try waitForLockState(.locked, of: service)
    }

    /// Nothing on the bus unlocks a keychain: neither logind's own Unlock signal and LockedHint false,
    /// nor the same sent by another connection.
    func testNoSignalUnlocksAKeychain() throws {
        let bus = try TestBus()
        let logind = try FakeLogind(bus: bus, uid: getuid())
        defer { logind.stop() }
        let daemon = try TestDaemon(
            arguments: ["--follow-session-lock"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        try waitUntilFollowing(daemon)
        let service = daemon.service()
        try service.setPasscode(SecureBytesHelper.bytes("2468"), current: nil)
        try logind.emitLock()
        try waitForLockState(.locked, of: service)
        let impostor = try DBusConnection(address: bus.address)
        for sender in [logind.connection, impostor] {
            try sender.send(
                .signal(path: FakeLogind.sessionPath, interface: "org.freedesktop.login1.Session", member: "Unlock"))
        }
        try logind.emitLockedHint(false)
        usleep(500_000)
        XCTAssertEqual(try service.status().lockState, .locked, "a signal unlocked the keychain")
    }

    func testALogindThatRestartsIsFollowedUnderItsNewName() throws {
        let bus = try TestBus()
        var first: FakeLogind? = try FakeLogind(bus: bus, uid: getuid())
        let daemon = try TestDaemon(
            arguments: ["--follow-session-lock"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        try waitUntilFollowing(daemon)
        let service = daemon.service()
        try service.setPasscode(SecureBytesHelper.bytes("2468"), current: nil)
        first?.stop()
        first = nil  // its connection closes: the bus gives the name up
        let second = try FakeLogind(bus: bus, uid: getuid())
        defer { second.stop() }
        try second.emitLock()
        try waitForLockState(.locked, of: service)
        XCTAssertEqual(second.userQueries, 1, "the new logind is asked who owns the session")
    }

    func testADaemonWithoutABusServesAndSaysWhy() throws {
        let directory = NSTemporaryDirectory() + "no-bus-" + UUID().uuidString.prefix(8)
        let daemon = try TestDaemon(
            arguments: ["--follow-session-lock"],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory)/absent"])
        try waitUntil { daemon.log.contains("cannot follow the login sessions' lock") }
        XCTAssertEqual(try daemon.service().status().lockState, .noPasscode)
    }

    // MARK: Helpers

    private func waitUntilFollowing(_ daemon: TestDaemon) throws {
        try waitUntil { daemon.log.contains("following the login sessions' lock") }
    }

    private func waitForLockState(_ state: LockState, of service: some KeychainService) throws {
        try waitUntil { (try? service.status().lockState) == state }
        XCTAssertEqual(try service.status().lockState, state)
    }

    private func waitUntil(seconds: Double = 10, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else { throw TestDaemon.Failure(description: "timed out waiting") }
            usleep(20_000)
        }
    }
}

/// What the daemon needs of systemd-logind: the name `org.freedesktop.login1`, session objects whose
/// `User` property names their uid, and the sessions' signals.
final class FakeLogind: Sendable {
    static let sessionPath = "/org/freedesktop/login1/session/c1"
    let connection: DBusConnection
    /// The uid of each session object this connection answers for.
    private let sessions: Mutex<[String: UInt32]>
    private let queries = Mutex(0)
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// How many times the `User` of a session was asked.
    var userQueries: Int { queries.withLock { $0 } }

    /// Owns logind's name on `bus` and answers property queries for one session of `uid`.
    init(bus: TestBus, uid: uid_t) throws {
        sessions = Mutex([Self.sessionPath: uid])
        connection = try DBusConnection(address: bus.address)
        // An earlier owner's connection may still be closing.
        let deadline = Date().addingTimeInterval(5)
        while try !connection.requestName("org.freedesktop.login1") {
            guard Date() < deadline else {
                throw TestDaemon.Failure(description: "could not own org.freedesktop.login1")
            }
            usleep(20_000)
        }
        Thread { [self] in
            answer()
            finished.signal()
        }.start()
    }

    /// Stops answering and waits for the answering thread; the name goes when the last reference does.
    func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        finished.wait()
    }

    func addSession(_ path: String, uid: uid_t) { sessions.withLock { $0[path] = uid } }

    func emitLock(path: String = FakeLogind.sessionPath) throws {
        try connection.send(.signal(path: path, interface: "org.freedesktop.login1.Session", member: "Lock"))
    }

    func emitLockedHint(_ locked: Bool, path: String = FakeLogind.sessionPath) throws {
        try connection.send(
            .signal(
                path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                body: [
                    .string("org.freedesktop.login1.Session"),
                    .array(
                        element: "{sv}", [.dictEntry(key: .string("LockedHint"), value: .variant(.boolean(locked)))]),
                    .array(element: "s", []),
                ]))
    }

    private func answer() {
        while !stopping.load(ordering: .acquiring) {
            guard let message = try? connection.receive(timeout: .milliseconds(100)), message.kind == .methodCall,
                message.member == "Get", let path = message.path
            else { continue }
            guard let uid = sessions.withLock({ $0[path] }) else {
                _ = try? connection.send(
                    .error(to: message, name: "org.freedesktop.login1.NoSuchSession", message: "no such session"))
                continue
            }
            queries.withLock { $0 += 1 }
            let user = DBusValue.structure([.uint32(uid), .objectPath("/org/freedesktop/login1/user/_\(uid)")])
            _ = try? connection.send(.reply(to: message, body: [.variant(user)]))
        }
    }
}
