import Foundation
import KeychainClient
import KeychainCore
import KeychainEngine
import Synchronization

/// securityd against the embedded engine, in one run: the copy-matching round trip with 1, 4 and 16
/// concurrent clients (each a connection of its own) beside the embedded engine lookup, add throughput
/// with 1 and 16 clients (group commit), and the `security` command as a whole process through the
/// daemon beside the embedded command.
struct DaemonBenchmark {
    let root: String
    let samples: Int
    let writeSamples: Int

    /// `commandOnly`: after setting the daemon up, measure the command through it and nothing else.
    func run(embeddedCommandMedian: Double?, commandSamples: Int, profileOnly: Int? = nil, commandOnly: Bool = false) {
        let binary = Self.beside("securityd")
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            print("securityd: not built beside the benchmark (swift build -c release), skipped")
            return
        }
        let socket = root + "/run/securityd.sock"
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: binary)
        daemon.arguments = ["--home", root + "/daemon", "--socket", socket, "--exit-with-parent"]
        let logPath = root + "/securityd.log"
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        daemon.standardError = FileHandle(forWritingAtPath: logPath)
        do {
            try daemon.run()
        } catch {
            fail("cannot start securityd: \(error)")
        }
        defer {
            daemon.terminate()
            daemon.waitUntilExit()
        }
        let service = DaemonKeychainService(socketPath: socket)
        let deadline = Date().addingTimeInterval(10)
        while (try? service.status()) == nil {
            if Date() > deadline || !daemon.isRunning { fail("securityd did not start") }
            usleep(10_000)
        }
        let groups = ["TEAM.bench"]
        do {
            for program in ["/proc/self/exe", Self.beside("security")] {
                let path = URL(fileURLWithPath: program).resolvingSymlinksInPath().path
                guard FileManager.default.isExecutableFile(atPath: path) else { continue }
                try service.registerApp(
                    AppRegistrationRequest(
                        executablePath: path, applicationIdentifier: "TEAM.bench", accessGroups: groups,
                        trustPathOnly: false, passcode: nil))
            }
            // A general-purpose tool as the command is, so the daemon does the same work for both.
            if let lean = benchmarkProgram("keychain-bench-lean-client") {
                try service.registerApp(
                    AppRegistrationRequest(
                        executablePath: lean, applicationIdentifier: "TEAM.bench.lean", accessGroups: groups,
                        trustPathOnly: false, passcode: nil, generalPurposeTool: true))
            }
            for index in 0..<1_000 { _ = try service.add(password(index)) }
            // The daemon knows `security` as a general-purpose tool: each of its reads asks the user.
            // The simulated sensor, enrolled and set to match, answers for them (its cost is measured).
            _ = try service.biometry(.enroll)
            _ = try service.biometry(.standingAnswer(.match))
        } catch {
            fail("cannot prepare the daemon: \(error)")
        }

        if let profileOnly {
            for sample in 0..<profileOnly { _ = try? service.copyMatching(lookup(sample)) }
            return
        }
        if commandOnly {
            measureCommand(
                socket: socket, daemon: daemon.processIdentifier, samples: commandSamples, embeddedCommandMedian: nil)
            return
        }
        // The embedded engine on the same 1,000 items, and the floor, measured now beside the daemon.
        let floor: Latencies
        var engine = Latencies()
        var roundTrip = Latencies()
        var interleavedEngine = Latencies()
        do {
            try FileManager.default.createDirectory(atPath: root + "/daemon-floor", withIntermediateDirectories: true)
            let floorTable = try Floor(count: 1_000, directory: root + "/daemon-floor")
            var floorReads = Latencies()
            for sample in 0..<samples {
                let wanted = try floorTable.digest((sample &* 7919) % 1_000)
                try floorReads.measure { try floorTable.lookup(wanted) }
            }
            floor = floorReads
            let keychain = try Keychain(directory: root + "/daemon-embedded")
            try keychain.add(contentsOf: (0..<1_000).map(password), client: ClientIdentity(accessGroups: groups))
            for sample in 0..<samples {
                let query = lookup(sample)
                try engine.measure {
                    _ = try keychain.copyMatching(query, client: ClientIdentity(accessGroups: groups))
                }
            }
            // Then interleaved with the one-client round trip, sample by sample: the machine's noise falls
            // on both alike, but each lookup also finds the caches the other left behind.
            let roundTripService = DaemonKeychainService(socketPath: socket)
            for sample in 0..<samples {
                let query = lookup(sample)
                try interleavedEngine.measure {
                    _ = try keychain.copyMatching(query, client: ClientIdentity(accessGroups: groups))
                }
                try roundTrip.measure { _ = try roundTripService.copyMatching(query) }
            }
        } catch {
            fail("embedded side: \(error)")
        }

        var table = TimingTable(ratioHeadings: ["× floor", "× embedded"])
        func line(_ name: String, _ latencies: Latencies, extra: String = "") {
            table.add(
                name, latencies, ratios: [latencies.median / floor.median, latencies.median / engine.median],
                note: extra)
        }
        line("floor (SQLite read + AES-GCM)", floor)
        line("embedded engine lookup → data", engine)
        var oneClient = Latencies()
        for clients in [1, 4, 16] {
            let (latencies, rate) = concurrently(clients: clients, socket: socket, count: samples) { service, sample in
                _ = try service.copyMatching(lookup(sample))
            }
            line(
                "round trip → data, \(clients) client\(clients == 1 ? "" : "s")", latencies,
                extra: String(format: "   %8.0f lookups/s", rate))
            if clients == 1 { oneClient = latencies }
        }
        line("embedded lookup, interleaved", interleavedEngine)
        line("round trip → data, interleaved", roundTrip)
        print("securityd (user mode), 1,000 items stored; round trips over its Unix socket")
        table.print()
        print(
            String(
                format:
                    "one client's round trip over the embedded lookup: %.2f× measured apart, %.2f× interleaved (target ≤ 3×)",
                oneClient.median / engine.median, roundTrip.median / interleavedEngine.median))

        var rates: [Int: Double] = [:]
        var soloWrites = 1_000  // the items loaded above, one client: one commit each
        for clients in [1, 16] {
            let (latencies, rate) = concurrently(clients: clients, socket: socket, count: writeSamples * 2) {
                service, sample in
                var item = password(100_000 + sample)
                item["acct"] = .string("add-\(clients)-\(sample)")
                _ = try service.add(item)
            }
            rates[clients] = rate
            if clients == 1 { soloWrites += latencies.samples.count }
            line(
                "add, \(clients) client\(clients == 1 ? "" : "s") (group commit)", latencies,
                extra: String(format: "   %8.0f adds/s", rate))
        }
        if let one = rates[1], let sixteen = rates[16] {
            print(String(format: "add throughput, 16 clients over 1: %.1f× (target ≥ 8×)", sixteen / one))
        }

        measureEnclaveSignatures(service: service, groups: groups)

        measureCommand(
            socket: socket, daemon: daemon.processIdentifier, samples: commandSamples,
            embeddedCommandMedian: embeddedCommandMedian)
        // The daemon reports its writes and commits when it stops; the lone writer's went one per commit.
        daemon.terminate()
        daemon.waitUntilExit()
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        if let line = log.split(separator: "\n").first(where: { $0.contains(" writes in ") }) {
            // "… uid U: W writes in C commits (…)"
            let words = line.split(separator: " ")
            if let index = words.firstIndex(of: "writes"), index > 0, index + 2 < words.count,
                let allWrites = Int(words[index - 1]), let allCommits = Int(words[index + 2])
            {
                let (writes, commits) = (allWrites - soloWrites, allCommits - soloWrites)
                if commits > 0 {
                    print(
                        String(
                            format: "group commit, 16 clients: %.1f writes per commit (%d writes, %d commits)",
                            Double(writes) / Double(commits), writes, commits))
                }
            }
        }
        print("")
    }

    /// An enclave key's signature made by the daemon beside one made by the embedded engine, in
    /// turn sample by sample: what holding the key outside the app costs.
    private func measureEnclaveSignatures(service: DaemonKeychainService, groups: [String]) {
        let parameters: [String: ItemValue] = ["tkid": .string(enclaveTokenID), "atag": .string("bench")]
        let message = Data("a message to sign, as an app signs a request".utf8)
        let operation = EnclaveKeyOperation.sign(hash: .sha256, input: .message, data: message)
        var embedded = Latencies()
        var throughDaemon = Latencies()
        do {
            let keychain = try Keychain(directory: root + "/daemon-enclave")
            let client = ClientIdentity(accessGroups: groups)
            func useQuery(_ answer: ItemResult?) throws -> [String: ItemValue] {
                guard case .dictionary(let item)? = answer, let reference = item["v_PersistentRef"] else {
                    throw KeychainError.internalError("no enclave key was made")
                }
                return ["class": .string("keys"), "v_PersistentRef": reference]
            }
            let local = try useQuery(try keychain.generateEnclaveKey(parameters, client: client))
            let remote = try useQuery(try service.generateEnclaveKey(parameters))
            for sample in 0..<samples {
                for step in 0..<2 {
                    if (step == 0) == (sample % 2 == 0) {
                        try embedded.measure {
                            _ = try keychain.useEnclaveKey(local, operation: operation, client: client)
                        }
                    } else {
                        try throughDaemon.measure { _ = try service.useEnclaveKey(remote, operation) }
                    }
                }
            }
        } catch {
            fail("enclave signatures: \(error)")
        }
        print(
            "enclave key ECDSA P-256 signature: embedded engine \(format(embedded.median)), through securityd "
                + "\(format(throughDaemon.median))"
                + String(format: " (%.2f× the embedded)", throughDaemon.median / embedded.median))
    }

    private func lookup(_ sample: Int) -> [String: ItemValue] {
        [
            "class": .string("genp"), "svce": .string("bench.example.com"),
            "acct": .string("user-\((sample &* 7919) % 1_000)"), "r_Data": .bool(true),
        ]
    }

    /// Runs `count` calls spread over `clients` threads, each with a connection of its own; returns the
    /// latency of every call and the calls per second of the whole.
    private func concurrently(
        clients: Int, socket: String, count: Int,
        _ body: @escaping @Sendable (DaemonKeychainService, Int) throws -> Void
    ) -> (Latencies, Double) {
        let collected = Mutex<[Double]>([])
        let failures = Atomic<Int>(0)
        let services = (0..<clients).map { _ in DaemonKeychainService(socketPath: socket) }
        for service in services { _ = try? service.status() }  // connected before the clock starts
        let perClient = max(count / clients, 1)
        let start = DispatchTime.now().uptimeNanoseconds
        // Threads of their own: concurrentPerform would run no more at once than there are cores.
        runThreads(clients) { client in
            var latencies = Latencies()
            for index in 0..<perClient {
                do {
                    try latencies.measure { try body(services[client], client * perClient + index) }
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
            }
            collected.withLock { $0 += latencies.samples }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        if failures.load(ordering: .relaxed) > 0 { fail("\(failures.load(ordering: .relaxed)) daemon calls failed") }
        return (Latencies(samples: collected.withLock { $0 }), Double(perClient * clients) / seconds)
    }

    /// `security find-generic-password -w` as a whole process through the daemon, with the static Swift
    /// floor and the lean client (`keychain-bench-lean-client`) spawned in turn, sample by sample. A
    /// daemon of this same user (not root) is the per-user daemon's case: the command does not fork to
    /// protect its memory (see its `main`). Any other (the system daemon's case, and root's) it does.
    /// The daemon's own CPU time for each new process is summed over the runs of each kind, read from
    /// its CPU clock around each spawn (`daemon` is its pid).
    private func measureCommand(socket: String, daemon: Int32, samples: Int, embeddedCommandMedian: Double?) {
        let security = Self.beside("security")
        guard samples > 0, FileManager.default.isExecutableFile(atPath: security) else { return }
        let environment = ["KEYCHAIN_SOCKET=" + socket, "HOME=" + root, "PATH=/usr/bin:/bin"]
        var floor = Latencies()
        var command = Latencies()
        var leanClient = Latencies()
        let swiftFloor = benchmarkProgram("keychain-bench-floor")
        let lean = benchmarkProgram("keychain-bench-lean-client")
        let daemonClock = ProcessCPUClock(pid: daemon)
        var daemonForCommand: UInt64 = 0
        var daemonForLeanClient: UInt64 = 0
        for sample in 0..<samples {
            if let swiftFloor { floor.measure { _ = spawn(swiftFloor, [], environment: environment) } }
            let account = "user-\((sample &* 7919) % 1_000)"
            let arguments = ["find-generic-password", "-s", "bench.example.com", "-a", account, "-w"]
            command.measure {
                let run = { spawn(security, arguments, environment: environment) }
                let done = daemonClock.map { $0.adding(to: &daemonForCommand, run) } ?? run()
                if !done { fail("security find-generic-password through the daemon failed") }
            }
            if let lean {
                leanClient.measure {
                    let run = { spawn(lean, ["bench.example.com", account], environment: environment) }
                    let done = daemonClock.map { $0.adding(to: &daemonForLeanClient, run) } ?? run()
                    if !done { fail("keychain-bench-lean-client through the daemon failed") }
                }
            }
        }
        let sameUser = DaemonOwner.runsAsThisUser(socketAt: socket)
        let whose =
            sameUser
            ? "securityd of the command's own user (the per-user daemon's case: no protective fork)"
            : "securityd of another user, or as root (the system daemon's case: the command forks to protect its memory)"
        print("security find-generic-password -w through \(whose), 1,000 items (\(samples) runs)")
        var table = TimingTable()
        var rows: [(String, Latencies)] = []
        if swiftFloor != nil { rows.append(("floor (a static Swift binary printing a line)", floor)) }
        rows.append(("security find-generic-password -w", command))
        if lean != nil { rows.append(("a client of the service alone (keychain-bench-lean-client)", leanClient)) }
        let base = swiftFloor != nil ? floor.median : command.median
        for (name, latencies) in rows { table.add(name, latencies, ratios: [latencies.median / base]) }
        table.print()
        if daemonClock != nil {
            // A mean, not a median: the clock is read around each spawn, and the daemon also polls for a
            // new connection's first frame (CPU the client does not wait for when a core is free).
            var cpu = String(
                format: "securityd's CPU per run, mean: %.0f µs for security",
                Double(daemonForCommand) / Double(samples) / 1e3)
            if lean != nil {
                cpu += String(
                    format: ", %.0f µs for the lean client", Double(daemonForLeanClient) / Double(samples) / 1e3)
            }
            print(cpu)
        }
        var line = "target: median ≤ 2× the static Swift floor"
        if let embeddedCommandMedian {
            line += String(format: "; %.2f× the embedded command (target ≤ 1×)", command.median / embeddedCommandMedian)
        }
        print(line)
    }

    static func beside(_ name: String) -> String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name).path
    }
}

/// Runs `body` on `count` threads at once (each its own thread, whatever the number of cores) and
/// returns when all have finished.
func runThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.start()
    }
    group.wait()
}
