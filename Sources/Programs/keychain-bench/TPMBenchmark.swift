import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainKeybag
import KeychainTPM
import KeychainTPMRoot

#if canImport(Glibc)
    import Glibc
#endif

/// The TPM root beside the software root, in one run, on a swtpm of its own: the open of a keychain,
/// an unlock (the same passcode function for both, so the difference is the chip's), and a lookup of a
/// class-C item, which must not touch the TPM (target: ≤ 1.1× the software root's lookup).
struct TPMBenchmark {
    let directory: String
    let samples: Int

    func run() {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm") else {
            print("TPM root: skipped, swtpm is not installed (apt-get install swtpm swtpm-tools)")
            return
        }
        if getenv("TSS2_LOG") == nil { setenv("TSS2_LOG", "all+NONE", 1) }
        let state = directory + "/swtpm"
        do {
            try startSoftwareTPM(state)
            defer { stopSoftwareTPM(state) }
            try measure(tcti: "swtpm:path=\(state)/sock")
        } catch {
            fail("TPM benchmark: \(error)")
        }
    }

    private func measure(tcti: String) throws {
        let tpm = try TPM(tcti: tcti)
        let function = PasscodeFunction.calibrated()
        let client = ClientIdentity(accessGroups: ["TEAM.bench"])
        func openKeychain(_ home: String, tpm: TPM?) throws -> Keychain {
            var options = KeychainOptions(passcodeFunction: function)
            if let tpm { options.deviceRoots = TPMDeviceRootProvider(tpm: tpm) }
            return try Keychain(directory: home, options: options)
        }
        var opens = (Latencies(), Latencies())
        var unlocks = (Latencies(), Latencies())
        var lookups = (Latencies(), Latencies())
        var signatures = (Latencies(), Latencies())
        for (position, usesTPM) in [false, true].enumerated() {
            let home = directory + (usesTPM ? "/tpm-root" : "/software-root")
            let keychain = try openKeychain(home, tpm: usesTPM ? tpm : nil)
            try keychain.setPasscode("123456", current: nil)
            let items = (0..<1_000).map { index -> [String: ItemValue] in
                [
                    "class": .string("genp"), "svce": .string("bench.example.com"), "acct": .string("user-\(index)"),
                    "pdmn": .string("ck"), "v_Data": .data(Data("token-\(index)-abcdefghijklmnop".utf8)),
                ]
            }
            try keychain.add(contentsOf: items, client: client)
            var opening = Latencies()
            for _ in 0..<10 {
                try opening.measure { try openKeychain(home, tpm: usesTPM ? tpm : nil).closeIdleConnections() }
            }
            var unlock = Latencies()
            for _ in 0..<10 {
                keychain.lock()
                try unlock.measure { try keychain.unlock(passcode: "123456") }
            }
            var lookup = Latencies()
            for sample in 0..<samples {
                let query: [String: ItemValue] = [
                    "class": .string("genp"), "svce": .string("bench.example.com"),
                    "acct": .string("user-\(sample % 1_000)"), "r_Data": .bool(true),
                ]
                try lookup.measure { _ = try keychain.copyMatching(query, client: client) }
            }
            var signature = Latencies()
            let made = try keychain.generateEnclaveKey(["tkid": .string(enclaveTokenID)], client: client)
            guard case .dictionary(let key)? = made, let reference = key["v_PersistentRef"] else {
                throw KeychainError.internalError("no enclave key was made")
            }
            let message = Data("signed by the benchmark".utf8)
            for _ in 0..<min(samples, 300) {
                try signature.measure {
                    _ = try keychain.useEnclaveKey(
                        ["class": .string("keys"), "v_PersistentRef": reference],
                        operation: .sign(hash: .sha256, input: .message, data: message), client: client)
                }
            }
            keychain.closeIdleConnections()
            if position == 0 {
                (opens.0, unlocks.0, lookups.0, signatures.0) = (opening, unlock, lookup, signature)
            } else {
                (opens.1, unlocks.1, lookups.1, signatures.1) = (opening, unlock, lookup, signature)
            }
        }
        let rows = [
            ("open", opens.0, opens.1), ("unlock", unlocks.0, unlocks.1), ("class-C lookup", lookups.0, lookups.1),
            ("enclave signature", signatures.0, signatures.1),
        ]
        var openSSL = Latencies()
        let direct = try AsymmetricKey.generate(.ec(.p256))
        for _ in 0..<min(samples, 300) {
            try openSSL.measure { _ = try direct.sign(Data("signed by the benchmark".utf8), .ecdsa(.sha256, .message)) }
        }
        print("TPM root (swtpm at \(tcti)) beside the software root, passcode function \(function):")
        print("  operation          software root     TPM root    ratio")
        for (name, software, hardware) in rows {
            print(
                "  \(name.padding(toLength: 18, withPad: " ", startingAt: 0))\(format(software.median))  \(format(hardware.median))  \(String(format: "%5.2f×", hardware.median / software.median))"
            )
        }
        print("  an ECDSA P-256 signature with OpenSSL directly: \(format(openSSL.median))")
        print(
            String(
                format:
                    "  the chip's part of an unlock: %@ (medians); a discrete hardware TPM is 10–100× slower per command",
                format(unlocks.1.median - unlocks.0.median)))
    }

    private func startSoftwareTPM(_ state: String) throws {
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let status = spawn(
            "/usr/bin/swtpm",
            [
                "socket", "--tpm2", "--tpmstate", "dir=\(state)", "--server", "type=unixio,path=\(state)/sock",
                "--ctrl", "type=unixio,path=\(state)/sock.ctrl", "--flags", "not-need-init,startup-clear", "--daemon",
                "--pid", "file=\(state)/pid",
            ])
        guard status == 0 else { throw KeychainError.notAvailable("swtpm did not start (\(status))") }
        for _ in 0..<500 where access(state + "/sock", F_OK) != 0 { usleep(10_000) }
    }

    private func stopSoftwareTPM(_ state: String) {
        _ = spawn("/usr/bin/swtpm_ioctl", ["--unix", state + "/sock.ctrl", "-s"])
    }

    /// Runs a program with its output on /dev/null (swtpm forks into the background) and waits for it.
    private func spawn(_ path: String, _ arguments: [String]) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in 0...2 {
            posix_spawn_file_actions_addopen(
                &actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var child: pid_t = 0
        guard posix_spawn(&child, path, &actions, nil, argv, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        return (status >> 8) & 0xFF
    }
}
