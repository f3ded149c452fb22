import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A launcher that runs a command with only some socket address families allowed, as systemd's
/// `RestrictAddressFamilies=` does (a seccomp filter on `socket` and `socketpair` whose first argument
/// is another family gets EAFNOSUPPORT), so that a test can start the daemon in the sandbox its unit
/// gives it without systemd. Built with the system's C compiler on first use.
public enum AddressFamilyRestriction {
    /// Families by the names units use.
    public static let families: [String: Int32] = ["AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16]

    /// `[launcher, "1,16"]` for the families named, to put before a command; nil without a C compiler.
    public static func prefix(allowing names: [String]) throws -> [String]? {
        guard let launcher = try launcher() else { return nil }
        let numbers = try names.map { name -> String in
            guard let number = families[name] else {
                throw TestDaemon.Failure(description: "no number known for address family \(name)")
            }
            return String(number)
        }
        return [launcher, numbers.joined(separator: ",")]
    }

    private static func launcher() throws -> String? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/cc") else { return nil }
        let directory = NSTemporaryDirectory() + "restrict-families-\(getpid())"
        let binary = directory + "/restrict-families"
        if FileManager.default.isExecutableFile(atPath: binary) { return binary }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        let source = directory + "/restrict-families.c"
        try Self.source.write(toFile: source, atomically: true, encoding: .utf8)
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/cc")
        compiler.arguments = ["-O1", "-o", binary, source]
        try compiler.run()
        compiler.waitUntilExit()
        guard compiler.terminationStatus == 0 else {
            throw TestDaemon.Failure(description: "cc could not build the address-family launcher")
        }
        chmod(binary, 0o755)
        return binary
    }

    private static let source = #"""
        #include <errno.h>
        #include <linux/audit.h>
        #include <linux/filter.h>
        #include <linux/seccomp.h>
        #include <stddef.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <sys/prctl.h>
        #include <sys/syscall.h>
        #include <unistd.h>

        #if defined(__x86_64__)
        #define ARCH AUDIT_ARCH_X86_64
        #elif defined(__aarch64__)
        #define ARCH AUDIT_ARCH_AARCH64
        #endif

        /* restrict-families 1,16 program arguments... */
        int main(int argc, char **argv) {
            if (argc < 3) return 2;
            unsigned allowed[16];
            int count = 0;
            for (char *item = strtok(argv[1], ","); item && count < 16; item = strtok(0, ","))
                allowed[count++] = (unsigned)atoi(item);
            struct sock_filter program[64];
            int n = 0;
            int allow = 7 + count + 1;
            program[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
            program[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0);
            program[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
            program[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
            program[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 1, 0);
            program[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socketpair, 0, allow - 6);
            program[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
            for (int i = 0; i < count; i++, n++)
                program[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, allowed[i], allow - (n + 1), 0);
            program[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EAFNOSUPPORT & SECCOMP_RET_DATA));
            program[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
            struct sock_fprog filter = { (unsigned short)n, program };
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) { perror("no_new_privs"); return 1; }
            if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) != 0) { perror("seccomp"); return 1; }
            execv(argv[2], argv + 2);
            perror("execv");
            return 127;
        }
        """#
}
