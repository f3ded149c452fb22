import Foundation
import KeychainCore
import KeychainEngine
import KeychainTPM
import KeychainTestSupport
import XCTest

/// A test with a swtpm of its own, a connection to it and a keychain directory to make, all gone
/// afterwards; skipped with the packages to install where swtpm is missing.
class KeychainOnSoftwareTPMTestCase: XCTestCase {
    var softwareTPM: SoftwareTPM!
    var tpm: TPM!
    var directory: String!
    let client = ClientIdentity(accessGroups: ["TEAM.app"])

    override func setUpWithError() throws {
        try XCTSkipUnless(SoftwareTPM.isAvailable, "swtpm is not installed (apt-get install swtpm swtpm-tools)")
        setenv("TSS2_LOG", "all+NONE", 1)
        KeychainLog.setSink { _ in }
        softwareTPM = try SoftwareTPM()
        tpm = try TPM(tcti: softwareTPM.tcti)
        directory = NSTemporaryDirectory() + "tpm-keychain-" + UUID().uuidString
    }

    override func tearDown() {
        tpm = nil
        softwareTPM?.stop()
        KeychainLog.setSink(nil)
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Asserts that `body` fails with `code`, its message containing `text` when given.
    func assertCode(
        _ code: KeychainError.Code, _ body: () throws -> Void, containing text: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as? KeychainError)?.code, code, "\(error)", file: file, line: line)
            if let text { XCTAssertTrue("\(error)".contains(text), "\(error)", file: file, line: line) }
        }
    }
}
