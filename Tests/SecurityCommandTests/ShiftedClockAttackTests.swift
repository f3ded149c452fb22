import Foundation
import KeychainEngine
import Synchronization
import XCTest

/// The review shifted the clock of the guessing process with an LD_PRELOAD shim: forward, every delay
/// was skipped; a year forward while failing, the owner was locked out for a year.
final class ShiftedClockAttackTests: XCTestCase {
    private var cli: CommandRunner!
    private var shim: String!

    override func setUpWithError() throws {
        cli = CommandRunner()
        shim = try Self.buildShim(in: cli.home + "-shim")
        XCTAssertEqual(try cli.run("set-keychain-password", "-p", "2468").status, 0)
    }

    override func tearDown() {
        if let shim { try? FileManager.default.removeItem(atPath: (shim as NSString).deletingLastPathComponent) }
        cli = nil
    }

    /// A shared library that moves the wall clock (CLOCK_REALTIME, gettimeofday, time) by
    /// SHIFT_SECONDS, as libfaketime does; the clock since boot is left alone.
    private static func buildShim(in directory: String) throws -> String {
        let compiler = ["/usr/bin/cc", "/usr/bin/gcc"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let compiler else { throw XCTSkip("no C compiler to build the clock shim") }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let source = directory + "/shim.c"
        try """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <stdlib.h>
        #include <sys/time.h>
        #include <time.h>
        static long shift(void) { const char *s = getenv("SHIFT_SECONDS"); return s ? atol(s) : 0; }
        int clock_gettime(clockid_t id, struct timespec *tp) {
            int (*real)(clockid_t, struct timespec *) = dlsym(RTLD_NEXT, "clock_gettime");
            int result = real(id, tp);
            if (result == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) tp->tv_sec += shift();
            return result;
        }
        int gettimeofday(struct timeval *tv, void *tz) {
            int (*real)(struct timeval *, void *) = dlsym(RTLD_NEXT, "gettimeofday");
            int result = real(tv, tz);
            if (result == 0 && tv) tv->tv_sec += shift();
            return result;
        }
        time_t time(time_t *out) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            if (out) *out = now.tv_sec;
            return now.tv_sec;
        }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let library = directory + "/shim.so"
        let build = Process()
        build.executableURL = URL(fileURLWithPath: compiler)
        build.arguments = ["-shared", "-fPIC", "-o", library, source, "-ldl"]
        try build.run()
        build.waitUntilExit()
        guard build.terminationStatus == 0 else { throw XCTSkip("the clock shim did not build") }
        return library
    }

    private func unlock(_ guess: String, shiftedBy seconds: Int) throws -> CommandResult {
        cli.extraEnvironment = ["LD_PRELOAD": shim, "SHIFT_SECONDS": "\(seconds)"]
        defer { cli.extraEnvironment = [:] }
        return try cli.run("unlock-keychain", "-p", guess)
    }

    private func secondsToNextAttempt() throws -> Int? {
        let info = try cli.run("show-keychain-info").stdout
        let line = info.split(separator: "\n").first { $0.contains("next attempt in:") }
        return line.flatMap {
            Int($0.split(separator: ":").last?.dropLast(2).trimmingCharacters(in: .whitespaces) ?? "")
        }
    }

    func testAClockShiftedForwardDoesNotSkipTheDelay() throws {
        for _ in 1...5 { XCTAssertEqual(try cli.run("unlock-keychain", "-p", "0000").status, 51) }
        XCTAssertEqual(try cli.run("unlock-keychain", "-p", "2468").status, 36, "the minute's delay runs")
        XCTAssertEqual(try unlock("2468", shiftedBy: 3600).status, 36, "an hour ahead: still waiting")
        XCTAssertEqual(try unlock("1111", shiftedBy: 365 * 86400).status, 36, "a year ahead: still waiting")
    }

    func testAClockShiftedForwardWhileFailingDoesNotLockTheOwnerOut() throws {
        for _ in 1...5 { XCTAssertEqual(try unlock("0000", shiftedBy: 365 * 86400).status, 51) }
        let wait = try XCTUnwrap(try secondsToNextAttempt())
        XCTAssertLessThanOrEqual(wait, 60, "the delay after five failures is a minute, whatever the clock said")
        XCTAssertGreaterThan(wait, 0)
    }
}
