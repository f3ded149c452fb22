import Foundation
import XCTest

/// A package that ports iOS code depends on us the way the README shows: the `Security` and
/// `LocalAuthentication` products on Linux only (on Apple platforms the system frameworks answer the
/// same imports). Built from a clean directory against a local clone of this repository (its committed
/// state), it compiles the seed examples verbatim and runs them.
final class ConsumerPackageTests: XCTestCase {
    func testACrossPlatformPackageBuildsAndRunsTheSeedExamples() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let work = NSTemporaryDirectory() + "consumer-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: work) }
        try FileManager.default.createDirectory(
            atPath: work + "/Consumer/Sources/Consumer", withIntermediateDirectories: true)
        let clone = try run("/usr/bin/env", ["git", "clone", "--quiet", root, work + "/swift-keychain"])
        XCTAssertEqual(clone.status, 0, clone.output)

        try """
        // swift-tools-version:6.0
        import PackageDescription

        let package = Package(
            name: "Consumer",
            dependencies: [
                // In a real package: .package(url: "https://.../swift-keychain.git", from: "...")
                .package(path: "../swift-keychain")
            ],
            targets: [
                .executableTarget(
                    name: "Consumer",
                    dependencies: [
                        .product(name: "Security", package: "swift-keychain", condition: .when(platforms: [.linux])),
                        .product(
                            name: "LocalAuthentication", package: "swift-keychain",
                            condition: .when(platforms: [.linux])),
                    ]
                )
            ]
        )
        """.write(toFile: work + "/Consumer/Package.swift", atomically: true, encoding: .utf8)
        let seeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        // Seed examples 1 and 3 (with the test imports dropped) and 2, verbatim.
        let examples = try String(contentsOf: seeds.appendingPathComponent("SeedExamplesTests.swift"), encoding: .utf8)
            .replacingOccurrences(of: "import XCTest\n", with: "")
        let start = try XCTUnwrap(examples.range(of: "// Seed example 1, verbatim."))
        try ("import Security\n\n" + examples[start.lowerBound...])
            .write(toFile: work + "/Consumer/Sources/Consumer/Examples.swift", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(
            atPath: seeds.appendingPathComponent("SeedExample2.swift").path,
            toPath: work + "/Consumer/Sources/Consumer/Biometry.swift")
        try """
        import Security

        try saveToken(token: "first", service: "consumer.example")
        try saveToken(token: "second", service: "consumer.example")
        print("token:", try readToken(service: "consumer.example"))
        saveSharedToken(token: Data("shared".utf8))
        var shared: AnyObject?
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "shared_token",
            kSecAttrAccessGroup as String: "group.com.example.shared", kSecReturnData as String: true,
        ]
        print("shared:", SecItemCopyMatching(query as CFDictionary, &shared), String(decoding: shared as? Data ?? Data(), as: UTF8.self))
        do {
            try saveWithBiometry(data: Data("bio".utf8), key: "bio")
            print("biometry: saved")
        } catch KeychainError.unexpectedStatus(let status) {
            print("biometry:", status)
        }
        """.write(toFile: work + "/Consumer/Sources/Consumer/main.swift", atomically: true, encoding: .utf8)

        let build = try run("/usr/bin/env", ["swift", "build", "--package-path", work + "/Consumer"])
        XCTAssertEqual(build.status, 0, build.output)
        XCTAssertFalse(build.output.contains("warning:"), build.output)
        let consumer = try run(
            work + "/Consumer/.build/debug/Consumer", [],
            environment: [
                "KEYCHAIN_HOME": work + "/keychain", "KEYCHAIN_ACCESS_GROUPS": "TEAM.consumer,group.com.example.shared",
                "KEYCHAIN_LOG": "off",
            ])
        XCTAssertEqual(consumer.status, 0, consumer.output)
        // No biometry is enrolled in the consumer's fresh keychain: an item bound to it cannot be made.
        XCTAssertEqual(consumer.output, "token: second\nshared: 0 shared\nbiometry: -25293\n")
    }

    private func run(_ program: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> (status: Int32, output: String)
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }
}
