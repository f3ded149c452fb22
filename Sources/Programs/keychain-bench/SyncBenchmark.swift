import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine
import KeychainSyncAgent
import KeychainSyncProtocol
import KeychainSyncStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Sync on a PostgreSQL and keychain-syncd servers of its own (Debian's postgresql; the servers are
/// the built keychain-syncd beside this program), each figure beside a floor of the same rows written
/// and read with libpq directly (the server's own store, no protocol, no crypto, no keychain):
/// - the initial sync of N items from one device to another (target ≤ 3× the floor);
/// - sync lag, a write on one device until it is readable on the two others, which long-poll;
/// - throughput of 16 devices syncing at once (16 accounts), through one server and through two.
struct SyncBenchmark {
    /// An account for the floor's writes, straight to the store: its writer (the zero id) a trusted device,
    /// as the store checks for every push.
    static func makeFloorAccount(_ account: Data, _ store: SyncStore) throws {
        let writer = StoredDevice(
            id: Data(count: 16), signingKey: Data([1]), encryptionKey: Data([2]), name: "floor",
            status: SyncStore.trusted)
        _ = try store.createAccount(
            account, salt: Data(count: 16), verifier: Data(count: 32), escrow: Data(), genesis: Data([1]),
            founder: writer)
    }

    let directory: String
    let items: Int
    let lagSamples: Int

    func run() {
        let binaries = "/usr/lib/postgresql/15/bin"
        guard FileManager.default.isExecutableFile(atPath: binaries + "/initdb") else {
            print("sync: skipped, PostgreSQL 15 is not installed (apt-get install postgresql)")
            return
        }
        do {
            let postgres = try BenchPostgres(directory: directory + "/postgres", binaries: binaries)
            defer { postgres.stop() }
            let servers = try (0..<2).map {
                try BenchSyncServer(directory: directory + "/syncd\($0)", database: postgres.conninfo)
            }
            defer { for server in servers { server.stop() } }
            try measure(postgres: postgres, servers: servers)
        } catch {
            fail("sync benchmark: \(error)")
        }
    }

    private func device(_ name: String) throws -> (Keychain, SyncAgent) {
        let keychain = try Keychain(
            directory: directory + "/device-" + name,
            options: KeychainOptions(passcodeFunction: .scrypt(logN: 4, r: 1, p: 1)))
        return (keychain, SyncAgent(keychain: keychain))
    }

    private static let client = ClientIdentity(accessGroups: ["TEAM.bench"])
    private static let secret = SecureBytes(copying: Array("benchmark recovery secret".utf8))

    private static func item(_ index: Int, _ prefix: String = "item") -> [String: ItemValue] {
        [
            "class": .string("genp"), "svce": .string("\(prefix).example.com"), "acct": .string("user-\(index)"),
            "sync": .bool(true), "v_Data": .data(Data("token-\(index)-abcdefghijklmnopqrstuvwxyz".utf8)),
        ]
    }

    private func measure(postgres: BenchPostgres, servers: [BenchSyncServer]) throws {
        print("sync — release build; PostgreSQL 15 and keychain-syncd on Unix sockets, started for this run")
        // The floor's store: no limit on new accounts (its writes are the benchmark's own).
        let store = try SyncStore(conninfo: postgres.conninfo, limits: SyncLimits(newAccountsPerHour: 0))

        // Floor: the same number of rows, of the size a record takes, pushed in batches of 500 and
        // pulled back, with the server's own store (libpq, binary parameters), no crypto.
        let (a, agentA) = try device("a")
        let (b, agentB) = try device("b")
        let (c, agentC) = try device("c")
        let address = try SyncAddress(parsing: servers[0].socket)
        _ = try agentA.enroll(server: address, accountName: "bench", recoverySecret: Self.secret, deviceName: "a")
        for (name, agent) in [("b", agentB), ("c", agentC)] {
            _ = try agent.enroll(
                server: try SyncAddress(parsing: servers[1].socket), accountName: "bench", recoverySecret: Self.secret,
                deviceName: name)
            try agentA.approve(device: Hex.encode(try agent.status().device.id))
        }
        _ = try agentB.syncNow()
        _ = try agentC.syncNow()
        try a.add(contentsOf: (0..<items).map { Self.item($0) }, client: Self.client)

        let floorAccount = try Random.bytesOrFail(16)
        try Self.makeFloorAccount(floorAccount, store)
        let recordSize = 512
        let floorStart = DispatchTime.now().uptimeNanoseconds
        var written = 0
        while written < items {
            let count = min(500, items - written)
            let records = (0..<count).map { offset -> PushedRecord in
                var id = Data(count: 16)
                withUnsafeBytes(of: UInt64(written + offset).littleEndian) { id.replaceSubrange(0..<8, with: $0) }
                return PushedRecord(recordID: id, replacing: 0, deleted: false, ciphertext: Data(count: recordSize))
            }
            _ = try store.push(
                account: floorAccount, writer: Data(count: 16), batch: Data(count: 64 * count), records: records)
            written += count
        }
        var cursor: Int64 = 0
        var read = 0
        while true {
            let page = try store.pull(account: floorAccount, after: cursor, limit: 1_000)
            guard let last = page.batches.last else { break }
            read += page.records.count
            cursor = last.firstSeq + 499
            if page.records.isEmpty { break }
            cursor = page.records.map(\.seq).max() ?? cursor
        }
        let floor = Double(DispatchTime.now().uptimeNanoseconds - floorStart) / 1e9

        let pushStart = DispatchTime.now().uptimeNanoseconds
        let pushed = try agentA.syncNow()
        let pushTime = Double(DispatchTime.now().uptimeNanoseconds - pushStart) / 1e9
        let pullStart = DispatchTime.now().uptimeNanoseconds
        let pulled = try agentB.syncNow()
        let pullTime = Double(DispatchTime.now().uptimeNanoseconds - pullStart) / 1e9
        guard pushed.pushed == items, pulled.pulled == items, read == items else {
            fail("sync benchmark: pushed \(pushed.pushed), pulled \(pulled.pulled), floor read \(read) of \(items)")
        }
        let total = pushTime + pullTime
        print(
            String(
                format:
                    "initial sync of %d items: push %.2f s + pull %.2f s = %.2f s (%.0f items/s); floor %.2f s; %.2f× floor (target ≤ 3×)",
                items, pushTime, pullTime, total, Double(items) / total, floor, total / floor))
        _ = try agentC.syncNow()

        // Lag: B and C long-poll and sync when woken; A writes and syncs; the lag ends when the item
        // reads back on the device.
        let stop = Atomic<Bool>(false)
        for agent in [agentB, agentC] {
            Thread.detachNewThread {
                while !stop.load(ordering: .relaxed) {
                    if (try? agent.waitForChange(timeout: .seconds(5))) == true { _ = try? agent.syncNow() }
                }
            }
        }
        Thread.sleep(forTimeInterval: 0.5)
        var lagB = Latencies()
        var lagC = Latencies()
        var roundFloor = Latencies()
        for sample in 0..<lagSamples {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try a.add(Self.item(sample, "lag"), client: Self.client)
            _ = try agentA.syncNow()
            var seen: [Bool] = [false, false]
            while !seen.allSatisfy({ $0 }) {
                for (index, keychain) in [b, c].enumerated() where !seen[index] {
                    var query = Self.item(sample, "lag")
                    query["v_Data"] = nil
                    query["r_Attributes"] = .bool(true)
                    if (try? keychain.copyMatching(query, client: Self.client)) != nil {
                        seen[index] = true
                        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                        if index == 0 { lagB.samples.append(elapsed) } else { lagC.samples.append(elapsed) }
                    }
                }
                if !seen.allSatisfy({ $0 }) { usleep(200) }
            }
            // Floor: one record written and read back with libpq.
            try roundFloor.measure {
                var id = Data(count: 16)
                withUnsafeBytes(of: UInt64(1_000_000 + sample).littleEndian) { id.replaceSubrange(0..<8, with: $0) }
                _ = try store.push(
                    account: floorAccount, writer: Data(count: 16), batch: Data(count: 64),
                    records: [
                        PushedRecord(recordID: id, replacing: 0, deleted: false, ciphertext: Data(count: recordSize))
                    ])
                _ = try store.record(account: floorAccount, recordID: id)
            }
        }
        stop.store(true, ordering: .relaxed)
        var table = TimingTable(ratioHeadings: ["p50 × floor", "p99 × floor"])
        for (label, lag) in [("lag A → B", lagB), ("lag A → C", lagC)] {
            table.add(label, lag, ratios: [lag.median / roundFloor.median, lag.p99 / roundFloor.p99])
        }
        table.add("floor: write + read one row", roundFloor, ratios: [1, 1])
        table.print()

        // Throughput: 16 devices, each its own account, each syncing one new item at a time.
        let rounds = 20
        for serverCount in [1, 2] {
            let devices = try (0..<16).map { index -> (Keychain, SyncAgent) in
                let (keychain, agent) = try device("t\(serverCount)-\(index)")
                _ = try agent.enroll(
                    server: try SyncAddress(parsing: servers[index % serverCount].socket),
                    accountName: "throughput-\(serverCount)-\(index)", recoverySecret: Self.secret,
                    deviceName: "t\(index)")
                return (keychain, agent)
            }
            let start = DispatchTime.now().uptimeNanoseconds
            let failures = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: devices.count) { index in
                let (keychain, agent) = devices[index]
                for round in 0..<rounds {
                    do {
                        _ = try keychain.add(Self.item(round, "t"), client: Self.client)
                        _ = try agent.syncNow()
                    } catch {
                        failures.add(1, ordering: .relaxed)
                    }
                }
            }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            // Floor: the same pushes, one row each, from 16 threads straight to the store.
            let accounts = try (0..<16).map { _ -> Data in
                let account = try Random.bytesOrFail(16)
                try Self.makeFloorAccount(account, store)
                return account
            }
            let floorStart = DispatchTime.now().uptimeNanoseconds
            DispatchQueue.concurrentPerform(iterations: 16) { index in
                for round in 0..<rounds {
                    var id = Data(count: 16)
                    withUnsafeBytes(of: UInt64(round).littleEndian) { id.replaceSubrange(0..<8, with: $0) }
                    _ = try? store.push(
                        account: accounts[index], writer: Data(count: 16), batch: Data(count: 64),
                        records: [
                            PushedRecord(
                                recordID: id, replacing: 0, deleted: false, ciphertext: Data(count: recordSize))
                        ])
                }
            }
            let floorElapsed = Double(DispatchTime.now().uptimeNanoseconds - floorStart) / 1e9
            let syncs = Double(16 * rounds)
            print(
                String(
                    format:
                        "16 devices, %d server%@: %.0f syncs/s (each a push, a pull and a signed head); floor %.0f writes/s; %.2f× floor%@",
                    serverCount, serverCount == 1 ? "" : "s", syncs / elapsed, syncs / floorElapsed,
                    elapsed / floorElapsed,
                    failures.load(ordering: .relaxed) > 0 ? " (\(failures.load(ordering: .relaxed)) failed)" : ""))
        }
    }
}

extension Random {
    static func bytesOrFail(_ count: Int) throws -> Data { try bytes(count) }
}

/// A PostgreSQL cluster of the benchmark's own, on a Unix socket in its directory (run as nobody when
/// the benchmark runs as root: PostgreSQL refuses root).
final class BenchPostgres {
    let conninfo: String
    private let process = Process()

    init(directory: String, binaries: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let user: uid_t? = getuid() == 0 ? 65534 : nil
        chmod(directory, 0o700)
        if let user { chown(directory, user, user) }
        let prefix = user.map { ["/usr/bin/setpriv", "--reuid", "\($0)", "--regid", "\($0)", "--clear-groups"] } ?? []
        let initdb = Process()
        initdb.executableURL = URL(fileURLWithPath: (prefix + [binaries + "/initdb"])[0])
        initdb.arguments = Array(
            (prefix + [binaries + "/initdb", "-D", directory + "/data", "-U", "postgres", "--auth=trust", "--no-sync"])
                .dropFirst())
        initdb.standardOutput = FileHandle.nullDevice
        initdb.standardError = FileHandle.nullDevice
        try initdb.run()
        initdb.waitUntilExit()
        guard initdb.terminationStatus == 0 else { throw SyncError(.server, "initdb failed") }
        let command =
            prefix + (user == nil ? [] : ["--pdeathsig", "TERM"])
            + [binaries + "/postgres", "-D", directory + "/data", "-k", directory, "-c", "listen_addresses="]
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        chmod(directory, 0o711)
        conninfo = "host=\(directory) dbname=postgres user=postgres"
        let deadline = Date().addingTimeInterval(30)
        while (try? SyncStore(conninfo: conninfo)) == nil {
            guard Date() < deadline, process.isRunning else { throw SyncError(.server, "PostgreSQL did not start") }
            usleep(50_000)
        }
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGINT)
            process.waitUntilExit()
        }
    }
}

/// A keychain-syncd (the one built beside this program) on a Unix socket.
final class BenchSyncServer {
    let socket: String
    private let process = Process()

    init(directory: String, database: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let user: uid_t? = getuid() == 0 ? 65534 : nil
        chmod(directory, 0o755)
        if let user { chown(directory, user, user) }
        socket = directory + "/sync.sock"
        let binary =
            URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("keychain-syncd").path
        let command =
            (user.map {
                ["/usr/bin/setpriv", "--reuid", "\($0)", "--regid", "\($0)", "--clear-groups", "--pdeathsig", "TERM"]
            }
                ?? []) + [binary, "--database", database, "--listen", socket]
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline, process.isRunning else { throw SyncError(.server, "keychain-syncd did not start") }
            usleep(20_000)
        }
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}
