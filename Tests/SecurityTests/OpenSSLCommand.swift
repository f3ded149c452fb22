import Foundation
import KeychainTestSupport
import XCTest

/// The `openssl` command, the key and certificate tests' independent implementation: run in a
/// directory, with optional standard input; its output and exit status. Skips the test where the
/// command is not installed (Debian's `openssl` package; `.ci/run` installs it).
enum OpenSSLCommand {
    static func run(_ arguments: [String], in directory: String, input: Data? = nil) throws -> (
        status: Int32, output: Data
    ) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            throw XCTSkip("needs the openssl command (Debian's openssl package)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let result = try ChildProcess.run(process, input: input)
        return (result.status, result.stdout)
    }
}
