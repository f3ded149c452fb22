import Foundation
import KeychainAuthenticators
import KeychainCore
import KeychainCrypto
import KeychainDBus
import KeychainEngine
import KeychainTestSupport
import XCTest

/// fprintd answering otherwise than for the keychain's user's enrolled finger.
final class FprintdStandInTests: EngineTestCase {
    private func service(bus: TestBus, user: String) throws -> InProcessKeychainService {
        keychain = nil
        let options = KeychainOptions(
            clock: clock,
            authenticators: .standard(
                sensor: .fprintd(bus: bus.address, username: user), biometryAnswerWait: .seconds(5)))
        return InProcessKeychainService(keychain: try Keychain(directory: directory, options: options), client: client)
    }

    private func guardedRead(_ service: InProcessKeychainService) throws -> KeychainError.Code? {
        var item = password("s", "fp", secret: "finger-guarded")
        item["accc"] = .accessControl(
            AccessControlPolicy(protection: .whenUnlocked, flags: AccessControlPolicy.Flag.biometryAny))
        _ = try? service.add(item)
        var query = password("s", "fp", secret: nil)
        query["r_Data"] = .bool(true)
        do {
            _ = try service.copyMatching(query)
            return nil
        } catch {
            return (error as? KeychainError)?.code
        }
    }

    func testAWrongFingerOpensNothing() throws {
        let bus = try TestBus()
        let fprintd = try FakeFprintd(bus: bus)
        defer { fprintd.stop() }
        let service = try service(bus: bus, user: "alice")
        fprintd.setResults([("verify-no-match", false), ("verify-no-match", true)])
        XCTAssertEqual(try guardedRead(service), .authenticationFailed)
        fprintd.setResults([("verify-match", true)])
        XCTAssertNil(try guardedRead(service))
    }

    /// The keychain asks fprintd about its own user only: the fingers it lists and the device it claims
    /// are that user's, never another's (whose match would otherwise open the item); with that user's
    /// list empty there is no biometry, whoever else has fingers enrolled.
    func testOnlyTheKeychainsUserIsAskedFor() throws {
        let bus = try TestBus()
        let fprintd = try FakeFprintd(bus: bus)
        defer { fprintd.stop() }
        let service = try service(bus: bus, user: "alice")
        XCTAssertNil(try guardedRead(service))
        XCTAssertFalse(fprintd.users.isEmpty)
        XCTAssertEqual(Set(fprintd.users), ["alice"], "fprintd was asked about another user")
        fprintd.setFingers([])
        XCTAssertNotNil(try guardedRead(service), "no finger of alice's, and yet biometry opened the item")
    }
}

/// A connection that sends fprintd's match signal, as if it were fprintd, to every connection there is.
final class DBusConnectionForTests: Sendable {
    private let connection: DBusConnection

    init(bus: TestBus) throws { connection = try DBusConnection(address: bus.address) }

    func broadcastMatch() {
        guard
            let names = try? connection.call(
                .call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "ListNames")),
            case .array(_, let listed)? = names.body.first
        else { return }
        for name in listed.compactMap(\.text) where name.hasPrefix(":") && name != connection.uniqueName {
            var signal = DBusMessage.signal(
                path: FakeFprintd.device, interface: "net.reactivated.Fprint.Device", member: "VerifyStatus",
                body: [.string("verify-match"), .boolean(true)])
            signal.destination = name
            _ = try? connection.send(signal)
        }
    }
}
