import Foundation
import XCTest

/// The SecItem suites once more, through the daemon: this test runs the test bundle again with
/// `KEYCHAIN_TEST_THROUGH_DAEMON=1`, so that every one of those tests starts a securityd of its own,
/// registers the bundle with the daemon, and makes each SecItem call a round trip. The same
/// assertions must hold as in the embedded run.
final class ThroughDaemonTests: XCTestCase {
    static let suites = [
        "SecItemSemanticsTests", "ClientIdiomTests", "BadInputTests", "ThreadSafetyTests", "SeedBehaviourTests",
        "AccessControlTests", "KeyItemTests", "EnclaveKeyTests", "SecCertificateTests",
    ]

    func testTheSecItemSuitesGiveTheSameAnswersThroughTheDaemon() throws {
        guard !KeychainTestCase.throughDaemon else { return }  // not from within the second run itself
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = [Self.suites.map { "SecurityTests.\($0)" }.joined(separator: ",")]
        var environment = ProcessInfo.processInfo.environment
        environment["KEYCHAIN_TEST_THROUGH_DAEMON"] = "1"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, text)
        // Every suite ran, and none was skipped or empty.
        for suite in Self.suites {
            XCTAssertTrue(
                text.contains("Test Suite '\(suite)' passed"), "\(suite) did not pass through the daemon:\n\(text)")
        }
        XCTAssertFalse(text.contains("with 0 tests"), text)
    }
}
