import CProcessControl
import Foundation
import KeychainClient
import KeychainCore
import XCTest

/// A client makes itself non-dumpable before it connects to a daemon of another user (which identifies
/// only such a process), and stays dumpable for a daemon of its own user (which cannot look into one).
/// A try made while no daemon listens yet decided nothing: it left the process non-dumpable for good,
/// and a per-user daemon started afterwards refused it ("cannot be looked into").
final class ClientDumpabilityTests: XCTestCase {
    func testATryWithoutADaemonLeavesTheProcessAsItWas() throws {
        XCTAssertEqual(process_control_allow_dumps(), 0)
        defer { _ = process_control_allow_dumps() }
        let missing = NSTemporaryDirectory() + "no-daemon-" + UUID().uuidString + "/securityd.sock"
        XCTAssertThrowsError(try DaemonKeychainService(socketPath: missing).status()) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .notAvailable, "\(error)")
        }
        XCTAssertEqual(process_control_is_dumpable(), 1, "no socket, no daemon: nothing to protect against")
    }
}
