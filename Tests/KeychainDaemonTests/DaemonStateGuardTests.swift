import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Decisions the daemon makes from the keychain's state, never from a request's shape: a first
/// passcode, and who keeps a keychain awake.
final class DaemonStateGuardTests: XCTestCase {
    /// The keybag decides "no passcode yet and not empty: refused" whatever the frame says about a
    /// current passcode: the raw variants a client can send are each refused, on a keychain with items
    /// and apps, and on one with apps only.
    func testAFirstPasscodeOnAKeychainWithContentsIsRefusedWhateverTheRequestSays() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system"])
        let programs = try ClientPrograms()
        let app = try programs.app("victim")
        let helper = try programs.app("raw-requests")
        let security = ClientPrograms.built("security")
        let user: uid_t = 65534
        var result = try ClientPrograms.run(
            security, ["set-keychain-password", "-p", "8642"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output)
        result = try ClientPrograms.run(
            security,
            ["app", "register", app, "--application-identifier", "TEAM.v", "--access-group", "TEAM.v", "-p", "8642"],
            daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "victim", "v-secret"], daemon: daemon, user: user).output,
            "status 0")
        result = try ClientPrograms.run(
            security, ["set-keychain-password", "-o", "8642", "-p", "", "-y"], daemon: daemon, user: user)
        XCTAssertEqual(result.status, 0, result.output)

        for current in ["anything", "-", "8642"] {
            XCTAssertEqual(
                try ClientPrograms.run(helper, ["set-passcode", "attacker", current], daemon: daemon, user: user)
                    .output,
                "status -25293", "a first passcode with current \(current) was accepted")
        }
        result = try ClientPrograms.run(security, ["show-keychain-info"], daemon: daemon, user: user)
        XCTAssertTrue(result.output.contains("passcode: not set"), result.output)

        // Apps alone are contents too.
        XCTAssertEqual(
            try ClientPrograms.run(app, ["remove", "web", "victim"], daemon: daemon, user: user).output, "status 0")
        XCTAssertEqual(
            try ClientPrograms.run(helper, ["set-passcode", "attacker", "anything"], daemon: daemon, user: user).output,
            "status -25293")
        // The registry still refuses the attacker.
        result = try ClientPrograms.run(
            security,
            [
                "app", "register", helper, "--application-identifier", "TEAM.v", "--access-group", "TEAM.v", "-p",
                "attacker",
            ],
            daemon: daemon, user: user)
        XCTAssertNotEqual(result.status, 0, result.output)
        // Root, the administrator, still may.
        XCTAssertEqual(
            try ClientPrograms.run(helper, ["set-passcode", "root-code", "anything"], daemon: daemon).output, "status 0"
        )
    }

    /// Another user, refused on every call, and an unregistered program of the keychain's own user both
    /// send a request a second: neither keeps the keychain from its idle lock.
    func testOnlyAKeychainsOwnAppsKeepItAwake() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system", "--idle-lock", "2"])
        let programs = try ClientPrograms()
        let stranger = try programs.app("stranger")
        let service = daemon.service()
        try service.setPasscode(SecureBytesHelper.bytes("1357"), current: nil)
        XCTAssertEqual(try service.status().lockState, .unlocked)
        let deadline = Date().addingTimeInterval(6)
        var locked = false
        var requests = 0
        while Date() < deadline {
            XCTAssertEqual(
                try ClientPrograms.run(stranger, ["count", "web"], daemon: daemon, user: 65534).output, "status -34018")
            XCTAssertEqual(try ClientPrograms.run(stranger, ["count", "web"], daemon: daemon).output, "status -34018")
            requests += 2
            if try service.status().lockState == .locked {
                locked = true
                break
            }
            usleep(200_000)
        }
        XCTAssertTrue(locked, "\(requests) refused requests kept the keychain unlocked: \(daemon.log)")
    }
}

/// Memory for large frames is reserved per uid: other users announcing large frames on every
/// connection they may open cannot make a registered app's large request fail.
final class FrameBudgetTests: XCTestCase {
    func testOtherUsersHoldingLargeFramesDoNotStarveARegisteredApp() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let daemon = try TestDaemon(arguments: ["--system"])
        let programs = try ClientPrograms()
        let app = try programs.app("large-writer")
        let holder = try programs.app("frame-holder")
        try daemon.register(executable: app, identifier: "TEAM.large", groups: ["TEAM.large"])
        var holders: [Process] = []
        defer {
            for process in holders where process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
        }
        // Three users, 128 connections each (the per-uid limit), each announcing a large frame and
        // sending nothing more: two with 1 MiB frames, the third with smaller ones that fill what is
        // left, more than one budget shared by everyone could hold.
        for (user, size) in [(65534, 1 << 20), (4242, 1 << 20), (4241, 50_000)] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = [
                "--reuid", "\(user)", "--regid", "\(user)", "--clear-groups", holder, "hold-frames", daemon.socket,
                "128", "\(size)",
            ]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            holders.append(process)
            let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            XCTAssertEqual(line.trimmingCharacters(in: .whitespacesAndNewlines), "holding 128")
        }
        // Give the daemon time to identify every connection and read its header.
        sleep(2)
        let secret = String(repeating: "s", count: 60_000)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "large", secret], daemon: daemon).output, "status 0", daemon.log)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "large"], daemon: daemon).output, secret)
    }
}

/// Every identity check fails closed: a process whose environment cannot be read whole is refused.
final class IdentityFailsClosedTests: XCTestCase {
    func testAProcessThatHidesItsEnvironmentIsRefused() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("hider")
        try daemon.register(executable: app, identifier: "TEAM.hide", groups: ["TEAM.hide"])
        XCTAssertEqual(try ClientPrograms.run(app, ["put", "web", "me", "hidden"], daemon: daemon).output, "status 0")
        // An environment of several pages, so that whole pages of it can be unmapped.
        let padding = ["PADDING": String(repeating: "x", count: 20_000)]
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "me"], daemon: daemon, environment: padding).output, "hidden")
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read-hiding-environment", "web", "me"], daemon: daemon, environment: padding)
                .output, "status -34018", daemon.log)
        XCTAssertTrue(daemon.log.contains("environment the daemon cannot read"), daemon.log)
    }

    /// Code that no file backs: a preloaded library can rename its variable in place (the environment
    /// then reads whole and clean) and move itself into anonymous memory (no path names it); what is
    /// left to see is executable memory without a file, and that is refused.
    func testAProcessRunningCodeThatNoFileBacksIsRefused() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("jit")
        try daemon.register(executable: app, identifier: "TEAM.jit", groups: ["TEAM.jit"])
        XCTAssertEqual(try ClientPrograms.run(app, ["put", "web", "me", "plain"], daemon: daemon).output, "status 0")
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read-with-runtime-code", "web", "me"], daemon: daemon).output,
            "status -34018", daemon.log)
        XCTAssertTrue(daemon.log.contains("executable memory that no file backs"), daemon.log)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "me"], daemon: daemon).output, "plain")
    }
}

/// A request naming another app's group is refused (-34018) before anything is looked up: neither its
/// answer nor its time tells whether such an item exists. Measured here, interleaved, as an app would
/// probe: the medians must agree within noise.
final class ForeignGroupTimingTests: XCTestCase {
    func testARefusalTakesTheSameTimeWhetherTheItemExistsOrNot() throws {
        let daemon = try TestDaemon()
        let service = daemon.service()
        try daemon.register(groups: ["TEAM.victim"])
        for index in 0..<200 {
            _ = try service.add([
                "class": .string("genp"), "svce": .string("bank"), "acct": .string("user-\(index)"),
                "v_Data": .data(Data("victim-secret".utf8)),
            ])
        }
        try daemon.register(groups: ["TEAM.attacker"])
        func probe(_ account: String) -> (nanoseconds: UInt64, error: KeychainError?) {
            let query: [String: ItemValue] = [
                "class": .string("genp"), "svce": .string("bank"), "acct": .string(account),
                "agrp": .string("TEAM.victim"), "r_Data": .bool(true),
            ]
            let start = DispatchTime.now().uptimeNanoseconds
            var refusal: KeychainError?
            do { _ = try service.copyMatching(query) } catch { refusal = error as? KeychainError }
            return (DispatchTime.now().uptimeNanoseconds - start, refusal)
        }
        var existing: [UInt64] = []
        var missing: [UInt64] = []
        for round in 0..<400 {
            let present = probe("user-\(round % 200)")
            let absent = probe("nobody-\(round)")
            XCTAssertEqual(present.error?.code, .missingEntitlement)
            XCTAssertEqual(present.error?.reason, absent.error?.reason, "the refusal's reason tells")
            existing.append(present.nanoseconds)
            missing.append(absent.nanoseconds)
        }
        let medians = [existing, missing].map { $0.sorted()[$0.count / 2] }
        let ratio = Double(medians.max() ?? 1) / Double(max(medians.min() ?? 1, 1))
        XCTAssertLessThan(ratio, 1.5, "refusals take \(medians[0]) ns for an existing item, \(medians[1]) ns for none")
    }
}
