import Foundation
import KeychainBytes
import KeychainCore
import KeychainTestSupport
import KeychainWire
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A process of the same user trying to borrow a registered program's identity, the ways a red team
/// found: connect first and exec the program, inject code into it, run it in a namespace of its own,
/// or take its connection. Each needs `cc` (and most another uid) and is skipped without.
final class DaemonAttackTests: XCTestCase {
    var programs: ClientPrograms!

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/cc") else { throw XCTSkip("needs cc") }
        programs = try ClientPrograms()
    }

    override func tearDown() { programs = nil }

    /// A raw client in C: `client SOCKET HEXFRAME` sends the frame and prints what came back;
    /// `connexec SOCKET HEXFRAME PROGRAM ARGS…` connects, then execs PROGRAM while a child sends the
    /// frame on the inherited connection.
    private func rawClient() throws -> String {
        let source = programs.directory + "/raw.c"
        try """
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <sys/socket.h>
        #include <sys/un.h>
        #include <unistd.h>
        static int ask(int fd, const char *hex) {
            size_t n = strlen(hex) / 2; unsigned char *frame = malloc(n);
            for (size_t i = 0; i < n; i++) sscanf(hex + 2 * i, "%2hhx", &frame[i]);
            if (write(fd, frame, n) != (ssize_t)n) { printf("closed\\n"); return 0; }
            unsigned char reply[65536]; ssize_t got = read(fd, reply, sizeof reply);
            if (got < 14) printf("closed\\n"); else printf("answer %d\\n", reply[5]);
            fflush(stdout); return 0;
        }
        int main(int argc, char **argv) {
            int fd = socket(AF_UNIX, SOCK_STREAM, 0); struct sockaddr_un a = {0};
            a.sun_family = AF_UNIX; strncpy(a.sun_path, argv[2], sizeof a.sun_path - 1);
            if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { printf("noconnect\\n"); return 1; }
            if (strcmp(argv[1], "client") == 0) return ask(fd, argv[3]);
            if (fork() == 0) { usleep(500000); return ask(fd, argv[3]); }
            execv(argv[4], argv + 4); return 1;
        }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let binary = programs.directory + "/raw"
        let result = try ClientPrograms.run("/usr/bin/cc", ["-O1", "-o", binary, source], daemon: nil)
        XCTAssertEqual(result.status, 0, result.output)
        chmod(binary, 0o755)
        return binary
    }

    private var readFrame: String {
        let frame = WireCodec.frame(
            .copyMatching(query: [
                "class": .string("genp"), "svce": .string("web"), "acct": .string("victim"), "r_Data": .bool(true),
            ]), id: 1)
        return Hex.encode(frame)
    }

    func testConnectingFirstAndThenExecingARegisteredProgramGetsNothing() throws {
        let daemon = try TestDaemon()
        let app = try programs.app("victim")
        try daemon.register(executable: app, identifier: "TEAM.v", groups: ["TEAM.v"])
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "victim", "TOPSECRET"], daemon: daemon).output, "status 0")
        let raw = try rawClient()
        // The raw program connects (unregistered), then becomes the registered app by exec while its child
        // asks on the connection they share.
        let result = try ClientPrograms.run(
            raw, ["connexec", daemon.socket, readFrame, app, "sleep", "2", "x"], daemon: daemon)
        // Depending on whether the daemon identified the connection before or after the exec: closed as
        // another executable's, or refused because the connection came through the exec. Never answered.
        XCTAssertTrue(["closed", "answer \(FrameKind.failure.rawValue)"].contains(result.output), result.output)
        XCTAssertTrue(
            daemon.log.contains("runs another executable than when it connected")
                || daemon.log.contains("holds the connection without close-on-exec"), daemon.log)
        // The same frame from the registered app's own connection is answered: the test can fail.
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "web", "victim"], daemon: daemon).output, "TOPSECRET")
    }

    /// A system daemon with `app` registered in nobody's keychain (passcode 2468), and nobody's secret in it.
    private func systemDaemonWithVictim() throws -> (TestDaemon, String) {
        let daemon = try TestDaemon(arguments: ["--system"])
        let app = try programs.app("victim")
        let security = ClientPrograms.built("security")
        XCTAssertEqual(
            try ClientPrograms.run(security, ["set-keychain-password", "-p", "2468"], daemon: daemon, user: 65534)
                .status, 0)
        let register = try ClientPrograms.run(
            security,
            ["app", "register", app, "--application-identifier", "TEAM.v", "--access-group", "TEAM.v", "-p", "2468"],
            daemon: daemon, user: 65534)
        XCTAssertEqual(register.status, 0, register.output)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "web", "victim", "TOPSECRET"], daemon: daemon, user: 65534).output,
            "status 0")
        return (daemon, app)
    }

    func testCodeInjectedIntoARegisteredProgramIsRefusedEvenWithItsTracesErased() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let (daemon, app) = try systemDaemonWithVictim()
        // The attacker's library, in a directory of the attacker's: its constructor hides LD_PRELOAD.
        let own = programs.directory + "/nobody"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
        chown(own, 65534, 65534)
        try """
        #include <string.h>
        extern char **environ;
        __attribute__((constructor)) static void hide(void) {
            for (char **e = environ; *e; e++) if (strncmp(*e, "LD_PRELOAD=", 11) == 0) (*e)[0] = 'X';
        }
        """.write(toFile: own + "/evil.c", atomically: true, encoding: .utf8)
        let build = try ClientPrograms.run(
            "/usr/bin/cc", ["-shared", "-fPIC", "-o", own + "/evil.so", own + "/evil.c"], daemon: nil, user: 65534)
        XCTAssertEqual(build.status, 0, build.output)
        // Set by env, after setpriv: a preload given to setpriv would hide itself there and never reach the app.
        let stolen = try ClientPrograms.run(
            "/usr/bin/env", ["LD_PRELOAD=" + own + "/evil.so", app, "read", "web", "victim"], daemon: daemon,
            user: 65534)
        XCTAssertEqual(stolen.output, "status -34018")
        XCTAssertTrue(daemon.log.contains("runs code from \(own)/evil.so"), daemon.log)
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "web", "victim"], daemon: daemon, user: 65534).output, "TOPSECRET")
    }

    /// The registered program traced, run through the dynamic loader by hand, or run from a memory copy
    /// of itself: none of these is that program, and each is refused (held in the outside review).
    func testATracedLoaderRunOrMemoryCopiedRegisteredProgramIsRefused() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let (daemon, app) = try systemDaemonWithVictim()
        let attempts: [(String, [String])] = [
            ("/usr/bin/strace", ["-f", "-o", "/dev/null", app, "read", "web", "victim"]),
            ("/lib64/ld-linux-x86-64.so.2", [app, "read", "web", "victim"]),
        ]
        for (program, arguments) in attempts where FileManager.default.isExecutableFile(atPath: program) {
            let result = try ClientPrograms.run(program, arguments, daemon: daemon, user: 65534)
            XCTAssertTrue(result.output.hasSuffix("status -34018"), "\(program): \(result.output)")
            XCTAssertFalse(result.output.contains("TOPSECRET"))
        }
        let source = programs.directory + "/memexec.c"
        try """
        #define _GNU_SOURCE
        #include <fcntl.h>
        #include <sys/mman.h>
        #include <unistd.h>
        int main(int argc, char **argv) {
            int in = open(argv[1], O_RDONLY), out = memfd_create("copy", 0); char buffer[65536]; ssize_t n;
            while ((n = read(in, buffer, sizeof buffer)) > 0) if (write(out, buffer, n) != n) return 1;
            extern char **environ; fexecve(out, argv + 1, environ); return 1;
        }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let binary = programs.directory + "/memexec"
        XCTAssertEqual(try ClientPrograms.run("/usr/bin/cc", ["-o", binary, source], daemon: nil).status, 0)
        chmod(binary, 0o755)
        let copied = try ClientPrograms.run(binary, [app, "read", "web", "victim"], daemon: daemon, user: 65534)
        XCTAssertEqual(copied.output, "status -34018")
        XCTAssertTrue(daemon.log.contains("memfd"), daemon.log)
    }

    func testARegisteredProgramRunInAUserNamespaceOfItsOwnIsRefused() throws {
        guard canSwitchUsers, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
            throw XCTSkip("needs root, setpriv and unshare")
        }
        let (daemon, app) = try systemDaemonWithVictim()
        let inside = try ClientPrograms.run(
            "/usr/bin/unshare", ["-Ur", app, "read", "web", "victim"], daemon: daemon, user: 65534)
        guard !inside.output.contains("unshare failed") else { throw XCTSkip("user namespaces are off here") }
        XCTAssertEqual(inside.output, "status -34018")
        XCTAssertTrue(daemon.log.contains("runs in a user namespace of its own"), daemon.log)
    }

    func testADumpableClientIsRefused() throws {
        guard canSwitchUsers else { throw XCTSkip("needs root and setpriv") }
        let (daemon, _) = try systemDaemonWithVictim()
        // The raw client never makes itself non-dumpable; registered, it still gets nothing.
        let raw = try rawClient()
        XCTAssertEqual(
            try ClientPrograms.run(
                ClientPrograms.built("security"),
                [
                    "app", "register", raw, "--application-identifier", "TEAM.v", "--access-group", "TEAM.v", "-p",
                    "2468",
                ],
                daemon: daemon, user: 65534
            ).status, 0)
        let result = try ClientPrograms.run(raw, ["client", daemon.socket, readFrame], daemon: daemon, user: 65534)
        XCTAssertEqual(result.output, "answer \(FrameKind.failure.rawValue)")
        XCTAssertTrue(daemon.log.contains("is dumpable"), daemon.log)
    }
}
