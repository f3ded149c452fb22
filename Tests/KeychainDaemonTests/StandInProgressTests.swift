import Foundation
import KeychainBytes
import KeychainClient
import KeychainCore
import KeychainTestSupport
import KeychainWire
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// What the client makes of progress frames from whatever serves its socket: taken for a backup or a
/// restore, handed on and never taken for the answer; for any other request, or with counts no
/// keychain has, a daemon not to listen to.
final class StandInProgressTests: XCTestCase {
    /// Serves one connection on a new socket: each request is answered with `progress` frames, then
    /// `answer`.
    private final class StandIn: @unchecked Sendable {
        let path: String
        private let listener: Int32

        init(progress: [(Int, Int)], answer: KeychainAnswer) throws {
            path = NSTemporaryDirectory() + "stand-in-" + UUID().uuidString.prefix(8) + ".sock"
            listener = try listeningUnixSocket(at: path)
            let server = listener
            Thread {
                let connection = accept(server, nil, nil)
                guard connection >= 0 else { return }
                defer { close(connection) }
                let stream = FrameStream(descriptor: connection)
                while let frame = try? stream.readFrame(idle: .seconds(5), stall: .seconds(1)) {
                    guard let request = try? WireCodec.request(from: frame) else { return }
                    for (done, total) in progress {
                        try? stream.writeFrame(
                            WireCodec.progressFrame(done: done, total: total, id: request.id), stall: .seconds(1))
                    }
                    try? stream.writeFrame(WireCodec.frame(.success(answer), id: request.id), stall: .seconds(1))
                }
            }.start()
        }

        func stop() {
            shutdown(listener, Int32(SHUT_RDWR))
            close(listener)
            unlink(path)
        }
    }

    func testProgressIsHandedOnForARestoreAndNeverTakenForItsAnswer() throws {
        let report = RestoreReport(restored: 3, notForThisDevice: 0, skipped: 0, replacedLocal: 0, keptLocal: 0)
        let standIn = try StandIn(progress: [(1, 3), (2, 3), (3, 3)], answer: .restore(report))
        defer { standIn.stop() }
        var told: [[Int]] = []
        let answer = try DaemonKeychainService(socketPath: standIn.path).restoreBackup(
            from: .path("/nonexistent.skbk"), password: nil, passcode: nil, progress: { told.append([$0, $1]) })
        XCTAssertEqual(answer, report)
        XCTAssertEqual(told, [[1, 3], [2, 3], [3, 3]])
    }

    func testProgressForAnotherRequestOrBeyondAnyKeychainIsADaemonNotToListenTo() throws {
        let status = KeybagStatus(
            lockState: .noPasscode, failedAttempts: 0, nextAttemptAllowed: nil, wipeAfterFailures: false)
        let forStatus = try StandIn(progress: [(1, 2)], answer: .status(status))
        defer { forStatus.stop() }
        XCTAssertThrowsError(try DaemonKeychainService(socketPath: forStatus.path).status()) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .notAvailable)
            XCTAssertTrue("\(error)".contains("progress for a request that has none"), "\(error)")
        }
        let huge = try StandIn(progress: [(1, Int(Int64.max))], answer: .done)
        defer { huge.stop() }
        XCTAssertThrowsError(
            try DaemonKeychainService(socketPath: huge.path).restoreBackup(
                from: .path("/nonexistent.skbk"), password: nil, passcode: nil, progress: { _, _ in })
        ) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .notAvailable)
        }
    }
}
