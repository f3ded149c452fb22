import Foundation
import KeychainDBus
import Synchronization

/// What the keychain needs of fprintd, on a test's own bus: the name `net.reactivated.Fprint`, a
/// manager with one device, the user's enrolled fingers, and a verification that answers with the
/// `VerifyStatus` signals it is told to send.
public final class FakeFprintd: Sendable {
    public static let device = "/net/reactivated/Fprint/Device/0"
    private let connection: DBusConnection
    private let state = Mutex<
        (fingers: [String], results: [(String, Bool)], claims: Int, verifications: Int, users: [String])
    >((["right-index-finger"], [("verify-match", true)], 0, 0, []))
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    public init(bus: TestBus) throws {
        connection = try DBusConnection(address: bus.address)
        guard try connection.requestName("net.reactivated.Fprint") else {
            throw TestDaemon.Failure(description: "could not own net.reactivated.Fprint")
        }
        Thread { [self] in
            serve()
            finished.signal()
        }.start()
    }

    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        finished.wait()
    }

    /// The fingers ListEnrolledFingers names (none: fprintd's NoEnrolledPrints error).
    public func setFingers(_ fingers: [String]) { state.withLock { $0.fingers = fingers } }

    /// The VerifyStatus signals the next verifications send, in order (result, done).
    public func setResults(_ results: [(String, Bool)]) { state.withLock { $0.results = results } }

    public var verifications: Int { state.withLock { $0.verifications } }

    /// The user names the keychain asked about (enrolled fingers) and claimed the device for, in order.
    public var users: [String] { state.withLock { $0.users } }

    private func serve() {
        while !stopping.load(ordering: .acquiring) {
            guard let call = try? connection.receive(timeout: .milliseconds(100)), call.kind == .methodCall else {
                continue
            }
            switch call.member {
            case "GetDefaultDevice": reply(call, [.objectPath(Self.device)])
            case "ListEnrolledFingers":
                let fingers = state.withLock { state in
                    if case .string(let user)? = call.body.first { state.users.append(user) }
                    return state.fingers
                }
                if fingers.isEmpty {
                    fail(call, "net.reactivated.Fprint.Error.NoEnrolledPrints")
                } else {
                    reply(call, [.array(element: "s", fingers.map { .string($0) })])
                }
            case "Claim":
                state.withLock { state in
                    state.claims += 1
                    if case .string(let user)? = call.body.first { state.users.append(user) }
                }
                reply(call, [])
            case "VerifyStart":
                let results = state.withLock { state in
                    state.verifications += 1
                    return state.fingers.isEmpty ? nil : state.results
                }
                guard let results else {
                    fail(call, "net.reactivated.Fprint.Error.NoEnrolledPrints")
                    continue
                }
                reply(call, [])
                for (result, done) in results {
                    _ = try? connection.send(
                        .signal(
                            path: Self.device, interface: "net.reactivated.Fprint.Device", member: "VerifyStatus",
                            body: [.string(result), .boolean(done)]))
                }
            default: reply(call, [])  // Release, VerifyStop
            }
        }
    }

    private func reply(_ call: DBusMessage, _ body: [DBusValue]) {
        _ = try? connection.send(.reply(to: call, body: body))
    }

    private func fail(_ call: DBusMessage, _ name: String) {
        _ = try? connection.send(.error(to: call, name: name, message: name))
    }
}
