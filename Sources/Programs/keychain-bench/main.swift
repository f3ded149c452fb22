// The project's benchmark: SecItem latencies on an embedded keychain holding N items, each reported
// with its ratio to a floor measured in the same run (the same kind of indexed SQLite read plus one
// AES-256-GCM decryption, done directly), because absolute times on shared machines are noise.
//
//   swift run -c release keychain-bench [--sizes 1,1000,100000] [--million] [--samples 2000]
//                                       [--write-samples 300] [--command-samples 60]
//   keychain-bench --help               every flag
//   keychain-bench --passcode-only      the passcode KDF alone: unlock cost and offline guess rates
//   keychain-bench --profile-lookups N | --profile-secitem N    N lookups alone, engine or SecItem, for perf
//   keychain-bench --daemon-only        securityd's figures alone (round trips, group commit, the command)
//   keychain-bench --keys-only          SecKey signing and verifying beside OpenSSL directly
//   keychain-bench --backup-only        backup and restore, and the backup password's guess rate
//   keychain-bench --tpm-only           the TPM root beside the software root (on a swtpm of its own)
//   keychain-bench --sync-only          sync: initial sync, lag, 16 devices (PostgreSQL and keychain-syncd of its own)

import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainEngine
import KeychainKeybag
import KeychainStorage
import Security
import Synchronization

struct Options {
    var sizes = [1, 1_000, 100_000]
    var samples = 2_000
    var writeSamples = 300
    var commandSamples = 60
    /// Only run this many engine lookups on 1,000 items, for a profiler (perf record).
    var profileLookups: Int?
    /// Only run this many SecItemCopyMatching lookups (returning data) on 1,000 items, for a profiler.
    var profileSecItem: Int?
    /// Only measure the passcode KDF.
    var passcodeOnly = false
    /// Only measure SecKey signing and verifying.
    var keysOnly = false
    /// Only measure securityd (and the embedded command it is compared with).
    var daemonOnly = false
    /// Only measure the command through a securityd of this same user (run as that user by a
    /// benchmark started as root).
    var perUserCommandOnly = false
    /// Only run this many copy-matching round trips through securityd, for a profiler.
    var profileDaemon: Int?
    /// Only measure engine adds with group commit from this many threads.
    var engineAddThreads: Int?
    /// Only measure backup and restore.
    var backupOnly = false
    /// Only measure the TPM root beside the software root.
    var tpmOnly = false
    /// Only measure sync (on a PostgreSQL and keychain-syncd of its own).
    var syncOnly = false
    var syncItems = 10_000
    var syncLagSamples = 100
    /// Only restore a backup of this many items, five times, for a profiler.
    var profileRestore: Int?
    var profileBackup: Int?
    /// The numbers of items backed up and restored.
    var backupSizes = [1_000, 100_000]

    static let usage = """
        usage: keychain-bench [--sizes N,N,...] [--million] [--samples N] [--write-samples N] [--command-samples N]
               keychain-bench --passcode-only | --keys-only | --daemon-only | --tpm-only | --backup-only [--backup-sizes N,N,...]
               keychain-bench --per-user-command-only [--command-samples N]
               keychain-bench --sync-only [--sync-items N] [--sync-lag-samples N]
               keychain-bench --profile-lookups N | --profile-secitem N | --profile-daemon N | --engine-adds THREADS
               keychain-bench --help

        A full run measures SecItem lookups and writes for each size, the security command as a whole
        process, securityd, the passcode derivation and SecKey signing, each beside a floor measured in
        the same run. Build with swift build -c release first.

          --sizes N,N,...        the numbers of stored items to measure (default 1,1000,100000)
          --million              also measure 1,000,000 stored items
          --samples N            reads per size, and round trips through securityd (default 2000)
          --write-samples N      adds, updates and deletes per size (default 300)
          --command-samples N    runs of the security command (default 60)
          --passcode-only        only the passcode derivation: unlock cost and offline guess rates
          --keys-only            only SecKey signing and verifying beside OpenSSL directly
          --daemon-only          only securityd (and the embedded command it is compared with)
          --per-user-command-only
                                 only the command through a securityd of its own user (started as root,
                                 the benchmark runs this part as nobody, with setpriv)
          --backup-only          only backup and restore, and the backup password's offline guess rate
          --tpm-only             only the TPM root beside the software root, on a swtpm of its own
          --sync-only            only sync: initial sync, lag with three devices, 16 devices on one and two
                                 servers (PostgreSQL and keychain-syncd started for the run)
          --sync-items N         items of the initial sync (default 10000)
          --sync-lag-samples N   writes whose lag is measured (default 100)
          --backup-sizes N,N,... the numbers of items backed up and restored (default 1000,100000)
          --profile-restore N    only restore a backup of N items, five times, for a profiler
          --profile-backup N     only back up a keychain of N items, five times, for a profiler
          --profile-lookups N    only N engine lookups on 1,000 items, for a profiler
          --profile-secitem N    only N SecItemCopyMatching lookups on 1,000 items, for a profiler
          --profile-daemon N     only N lookups through securityd, for a profiler
          --engine-adds THREADS  only engine adds with group commit from THREADS threads
          --help, -h             this text

        """

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        /// The value after `flag`: a positive whole number, or the usage and exit status 2.
        func count(after flag: String) -> Int {
            guard let text = iterator.next(), let value = Int(text), value > 0 else {
                Self.refuse("\(flag) needs a positive whole number")
            }
            return value
        }
        /// The list after `flag`: positive whole numbers separated by commas, or the usage and status 2.
        func counts(after flag: String) -> [Int] {
            let values = (iterator.next() ?? "").split(separator: ",", omittingEmptySubsequences: false).map {
                Int($0)
            }
            guard !values.isEmpty, values.allSatisfy({ ($0 ?? 0) > 0 }) else {
                Self.refuse("\(flag) needs positive whole numbers separated by commas")
            }
            return values.compactMap { $0 }
        }
        while let argument = iterator.next() {
            switch argument {
            case "--help", "-h":
                print(Self.usage, terminator: "")
                exit(0)
            case "--million": sizes.append(1_000_000)
            case "--sizes": sizes = counts(after: argument)
            case "--backup-sizes": backupSizes = counts(after: argument)
            case "--backup-only": backupOnly = true
            case "--tpm-only": tpmOnly = true
            case "--sync-only": syncOnly = true
            case "--sync-items": syncItems = count(after: argument)
            case "--sync-lag-samples": syncLagSamples = count(after: argument)
            case "--profile-restore": profileRestore = count(after: argument)
            case "--profile-backup": profileBackup = count(after: argument)
            case "--samples": samples = count(after: argument)
            case "--command-samples": commandSamples = count(after: argument)
            case "--write-samples": writeSamples = count(after: argument)
            case "--passcode-only": passcodeOnly = true
            case "--daemon-only": daemonOnly = true
            case "--per-user-command-only": perUserCommandOnly = true
            case "--keys-only": keysOnly = true
            case "--profile-daemon": profileDaemon = count(after: argument)
            case "--engine-adds": engineAddThreads = count(after: argument)
            case "--profile-lookups": profileLookups = count(after: argument)
            case "--profile-secitem": profileSecItem = count(after: argument)
            default: Self.refuse("unknown argument \(argument)")
            }
        }
    }

    private static func refuse(_ message: String) -> Never {
        FileHandle.standardError.write(Data("keychain-bench: \(message)\n\(usage)".utf8))
        exit(2)
    }
}

struct Latencies {
    var samples: [Double] = []  // seconds

    mutating func measure(_ body: () throws -> Void) rethrows {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }

    func percentile(_ fraction: Double) -> Double {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }

    var median: Double { percentile(0.5) }
    var p99: Double { percentile(0.99) }
}

func format(_ seconds: Double) -> String {
    if seconds < 1e-3 { return String(format: "%7.1f µs", seconds * 1e6) }
    return String(format: "%7.2f ms", seconds * 1e3)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("keychain-bench: \(message)\n".utf8))
    exit(1)
}

func check(_ status: OSStatus, _ what: String) {
    if status != errSecSuccess { fail("\(what) failed with \(status)") }
}

let options = Options(arguments: CommandLine.arguments)
if options.passcodeOnly {
    measurePasscode()
    exit(0)
}
let root = NSTemporaryDirectory() + "keychain-bench-" + UUID().uuidString
defer { try? FileManager.default.removeItem(atPath: root) }
setenv("KEYCHAIN_ACCESS_GROUPS", "TEAM.bench", 1)
let client = ClientIdentity(accessGroups: ["TEAM.bench"])

func password(_ index: Int) -> [String: ItemValue] {
    [
        "class": .string("genp"), "svce": .string("bench.example.com"), "acct": .string("user-\(index)"),
        "labl": .string("label \(index % 100)"), "v_Data": .data(Data("token-\(index)-abcdefghijklmnop".utf8)),
    ]
}

/// The floor: a table of N rows keyed by a 16-byte indexed digest, each holding a sealed 32-byte secret;
/// one lookup is the indexed SELECT plus one AES-256-GCM open.
/// The floor: the same kind of indexed SQLite read plus one AES-256-GCM decryption, done directly on a
/// table of `count` rows of its own.
final class Floor {
    private let connection: Connection
    private let key: SecureBytes
    private let hmac: HMACKey

    init(count: Int, directory: String) throws {
        connection = try Connection(path: directory + "/floor.db", create: true)
        try connection.execute("CREATE TABLE floor(digest BLOB NOT NULL, secret BLOB NOT NULL)")
        try connection.execute("CREATE INDEX floor_digest ON floor(digest)")
        key = try SecureBytes(randomCount: 32)
        hmac = try HMACKey(key: SecureBytes(randomCount: 32))
        try connection.writeTransaction {
            let insert = try connection.statement("INSERT INTO floor(digest, secret) VALUES (?, ?)")
            for index in 0..<count {
                insert.reset()
                try insert.bind(try digest(index), at: 1)
                try insert.bind(
                    try AESGCM.seal(Data("token-\(index)-abcdefghijklmnop".utf8), key: key, authenticating: Data()),
                    at: 2)
                _ = try insert.step()
            }
        }
    }

    /// The row's digest, computed outside what is timed.
    func digest(_ index: Int) throws -> Data { try hmac.authenticationCode(Data("user-\(index)".utf8)).prefix(16) }

    func lookup(_ wanted: Data) throws {
        let select = try connection.statement("SELECT secret FROM floor WHERE digest = ?")
        try select.bind(wanted, at: 1)
        guard try select.step(), let sealed = select.data(at: 0) else { fail("floor row missing") }
        _ = try AESGCM.open(sealed, key: key, authenticating: Data())
    }
}

if let lookups = options.profileLookups {
    setenv("KEYCHAIN_HOME", root + "/profile", 1)
    do {
        let keychain = try EmbeddedKeychain.current()
        try keychain.add(contentsOf: (0..<1_000).map(password), client: client)
        for sample in 0..<lookups {
            let query: [String: ItemValue] = [
                "class": .string("genp"), "svce": .string("bench.example.com"),
                "acct": .string("user-\((sample &* 7919) % 1_000)"), "r_Data": .bool(true),
            ]
            _ = try keychain.copyMatching(query, client: client)
        }
    } catch {
        fail("profile run: \(error)")
    }
    exit(0)
}

if let lookups = options.profileSecItem {
    setenv("KEYCHAIN_HOME", root + "/profile", 1)
    do {
        try EmbeddedKeychain.current().add(contentsOf: (0..<1_000).map(password), client: client)
    } catch {
        fail("profile run: \(error)")
    }
    // Built beforehand, as the benchmark builds them outside what it times.
    let queries: [CFDictionary] = (0..<1_000).map { index in
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench.example.com",
            kSecAttrAccount as String: "user-\(index)", kSecReturnData as String: true,
        ] as CFDictionary
    }
    var result: CFTypeRef?
    for sample in 0..<lookups { check(SecItemCopyMatching(queries[(sample &* 7919) % 1_000], &result), "copy") }
    exit(0)
}

if let threads = options.engineAddThreads {
    // The engine alone with group commit: adds per second from `threads` threads, no daemon.
    do {
        let keychain = try Keychain(directory: root + "/engine-adds", options: KeychainOptions(idleConnections: 64))
        let start = DispatchTime.now().uptimeNanoseconds
        runThreads(threads) { thread in
            for index in 0..<(2_000 / threads) {
                var item = password(index)
                item["acct"] = .string("t\(thread)-\(index)")
                _ = try? keychain.add(item, client: client)
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        print(
            String(
                format: "engine adds, %d threads, group commit: %.0f/s", threads,
                Double(2_000 / threads * threads) / seconds))
    } catch {
        fail("\(error)")
    }
    exit(0)
}

if let lookups = options.profileDaemon {
    DaemonBenchmark(root: root + "/securityd", samples: 0, writeSamples: 0).run(
        embeddedCommandMedian: nil, commandSamples: 0, profileOnly: lookups)
    exit(0)
}

if let items = options.profileRestore ?? options.profileBackup {
    try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    BackupBenchmark(sizes: [items], directory: root).profile(restoring: options.profileRestore != nil)
    try? FileManager.default.removeItem(atPath: root)
    exit(0)
}
if options.backupOnly {
    try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    BackupBenchmark(sizes: options.backupSizes, directory: root).run()
    try? FileManager.default.removeItem(atPath: root)
    exit(0)
}
if options.syncOnly {
    try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    chmod(root, 0o755)
    SyncBenchmark(directory: root, items: options.syncItems, lagSamples: options.syncLagSamples).run()
    try? FileManager.default.removeItem(atPath: root)
    exit(0)
}
if options.tpmOnly {
    try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    TPMBenchmark(directory: root, samples: options.samples).run()
    try? FileManager.default.removeItem(atPath: root)
    exit(0)
}
if options.keysOnly {
    KeyBenchmark(samples: min(options.samples, 500)).run()
    exit(0)
}

if options.perUserCommandOnly {
    DaemonBenchmark(root: root + "/securityd", samples: 0, writeSamples: 0).run(
        embeddedCommandMedian: nil, commandSamples: options.commandSamples, commandOnly: true)
    exit(0)
}
if options.daemonOnly {
    setenv("KEYCHAIN_SOCKET", "", 1)
    let command = measureCommand(samples: options.commandSamples)
    DaemonBenchmark(root: root + "/securityd", samples: options.samples, writeSamples: options.writeSamples).run(
        embeddedCommandMedian: command, commandSamples: options.commandSamples)
    measureCommandThroughPerUserDaemon(samples: options.commandSamples)
    exit(0)
}
// The embedded keychain throughout, whatever daemon this machine runs.
setenv("KEYCHAIN_SOCKET", "", 1)

print("swift-keychain benchmark — release build, embedded keychain, SecItem API")
print("samples: \(options.samples) reads, \(options.writeSamples) writes per size; ratios are medians over the floor")
print("")

var lookupMedians: [Int: Double] = [:]
for size in options.sizes {
    let directory = root + "/n\(size)"
    setenv("KEYCHAIN_HOME", directory, 1)
    let keychain: Keychain
    do {
        keychain = try EmbeddedKeychain.current()
        var batch: [[String: ItemValue]] = []
        for index in 0..<size {
            batch.append(password(index))
            if batch.count == 5_000 || index == size - 1 {
                try keychain.add(contentsOf: batch, client: client)
                batch.removeAll(keepingCapacity: true)
            }
        }
    } catch {
        fail("cannot prepare \(size) items: \(error)")
    }

    let floorTable: Floor
    do {
        floorTable = try Floor(count: size, directory: directory)
    } catch {
        fail("floor: \(error)")
    }
    func lookupQuery(_ index: Int, returning key: CFString) -> CFDictionary {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench.example.com",
            kSecAttrAccount as String: "user-\(index)", key as String: true,
        ] as CFDictionary
    }
    // The reads are measured in turn, sample by sample (each sample's four in a rotating order), so that
    // a burst of load on a shared machine falls on the floor as much as on what is compared with it.
    var floorReads = Latencies()
    var copyData = Latencies()
    var copyAttributes = Latencies()
    var engineData = Latencies()
    for sample in 0..<options.samples {
        let index = (sample &* 7919) % size
        let engineQuery: [String: ItemValue] = [
            "class": .string("genp"), "svce": .string("bench.example.com"), "acct": .string("user-\(index)"),
            "r_Data": .bool(true),
        ]
        let dataQuery = lookupQuery(index, returning: kSecReturnData)
        let attributeQuery = lookupQuery(index, returning: kSecReturnAttributes)
        var result: CFTypeRef?
        do {
            let wanted = try floorTable.digest(index)
            for step in 0..<4 {
                switch (step + sample) % 4 {
                case 0: try floorReads.measure { try floorTable.lookup(wanted) }
                case 1: try engineData.measure { _ = try keychain.copyMatching(engineQuery, client: client) }
                case 2: copyData.measure { check(SecItemCopyMatching(dataQuery, &result), "copy data") }
                default:
                    copyAttributes.measure { check(SecItemCopyMatching(attributeQuery, &result), "copy attributes") }
                }
            }
        } catch {
            fail("lookups: \(error)")
        }
    }
    var results: [(String, Latencies)] = [("floor (SQLite read + AES-GCM)", floorReads)]
    var add = Latencies()
    var update = Latencies()
    var delete = Latencies()
    for sample in 0..<options.writeSamples {
        let fresh: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench.example.com",
            kSecAttrAccount as String: "new-\(sample)", kSecValueData as String: Data("fresh-\(sample)".utf8),
        ]
        add.measure { check(SecItemAdd(fresh as CFDictionary, nil), "add") }
    }
    for sample in 0..<options.writeSamples {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench.example.com",
            kSecAttrAccount as String: "new-\(sample)",
        ]
        let changes = [kSecValueData as String: Data("changed-\(sample)".utf8)]
        update.measure { check(SecItemUpdate(query as CFDictionary, changes as CFDictionary), "update") }
    }
    for sample in 0..<options.writeSamples {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench.example.com",
            kSecAttrAccount as String: "new-\(sample)",
        ]
        delete.measure { check(SecItemDelete(query as CFDictionary), "delete") }
    }
    results += [
        ("engine lookup → data (no CF bridging)", engineData),
        ("SecItemCopyMatching → data", copyData), ("SecItemCopyMatching → attributes", copyAttributes),
        ("SecItemAdd (fsync)", add), ("SecItemUpdate (fsync)", update), ("SecItemDelete (fsync)", delete),
    ]
    lookupMedians[size] = copyData.median

    let floor = results[0].1.median
    var table = TimingTable()
    for (name, latencies) in results { table.add(name, latencies, ratios: [latencies.median / floor]) }
    print("N = \(size) items stored")
    table.print()
    print("")
}

/// Runs a program to completion with posix_spawn in `environment`, output discarded; false if it failed.
func spawn(_ path: String, _ arguments: [String], environment: [String]) -> Bool {
    var pid: pid_t = 0
    var actions: posix_spawn_file_actions_t = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    let envp = environment.map { strdup($0) } + [nil]
    defer { for variable in envp { free(variable) } }
    guard posix_spawn(&pid, path, &actions, nil, argv, envp) == 0 else { return false }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return status == 0
}

/// The `security` command as a whole process, against 10,000 stored items, the way a shell runs it: no
/// other process has the keychain open and `KEYCHAIN_ACCESS_GROUPS` is unset, so the command works in its
/// own group (`security`). The floor is spawning `/bin/true` the same number of times.
@discardableResult
func measureCommand(samples: Int) -> Double? {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("security").path
    guard FileManager.default.isExecutableFile(atPath: executable) else {
        print("security command: not built beside the benchmark (swift build -c release), skipped")
        return nil
    }
    let directory = root + "/command"
    do {
        // Opened here rather than through EmbeddedKeychain so that it can be closed before measuring.
        let keychain = try Keychain(directory: directory)
        let commandClient = ClientIdentity(accessGroups: ["security"])
        for start in stride(from: 0, to: 10_000, by: 5_000) {
            try keychain.add(contentsOf: (start..<start + 5_000).map(password), client: commandClient)
        }
        keychain.closeIdleConnections()
    } catch {
        fail("cannot prepare the command benchmark: \(error)")
    }
    let environment = ["KEYCHAIN_HOME=" + directory, "KEYCHAIN_SOCKET=", "HOME=" + root, "PATH=/usr/bin:/bin"]
    let swiftFloor = commandFloor()
    let cryptoFloor = benchmarkProgram("keychain-bench-crypto-floor")
    let leanEmbedded = benchmarkProgram("keychain-bench-lean-embedded")
    var floor = Latencies()
    var plainSwift = Latencies()
    var withCrypto = Latencies()
    var lean = Latencies()
    var command = Latencies()
    for sample in 0..<samples {
        floor.measure { _ = spawn("/bin/true", [], environment: environment) }
        if let swiftFloor { plainSwift.measure { _ = spawn(swiftFloor, [], environment: environment) } }
        if let cryptoFloor { withCrypto.measure { _ = spawn(cryptoFloor, [], environment: environment) } }
        let arguments = [
            "find-generic-password", "-s", "bench.example.com", "-a", "user-\((sample &* 7919) % 10_000)", "-w",
        ]
        command.measure {
            if !spawn(executable, arguments, environment: environment) {
                fail("security find-generic-password failed")
            }
        }
        if let leanEmbedded {
            lean.measure {
                if !spawn(leanEmbedded, ["bench.example.com", arguments[4]], environment: environment) {
                    fail("keychain-bench-lean-embedded failed")
                }
            }
        }
    }
    print("security find-generic-password -w, whole process, 10,000 items stored (\(samples) runs)")
    var table = TimingTable()
    var rows = [("spawn /bin/true", floor)]
    if swiftFloor != nil { rows.append(("floor (a static Swift binary printing a line)", plainSwift)) }
    // What OpenSSL 3 takes before a first decryption, which no embedded lookup can skip.
    if cryptoFloor != nil { rows.append(("floor + libcrypto loaded, 4 algorithms fetched", withCrypto)) }
    rows.append(("security find-generic-password -w", command))
    // The same lookup by the engine in a program without the facade or Foundation: what is left is the
    // engine's own start.
    if leanEmbedded != nil { rows.append(("the same, engine alone (keychain-bench-lean-embedded)", lean)) }
    let base = swiftFloor != nil ? plainSwift.median : floor.median
    for (name, latencies) in rows { table.add(name, latencies, ratios: [latencies.median / base]) }
    table.print()
    print("target: median ≤ 2× the static Swift floor")
    print("")
    return command.median
}

/// `keychain-bench-floor` beside this program, or nil (with a note) when it was not built.
func commandFloor() -> String? {
    guard let path = benchmarkProgram("keychain-bench-floor") else {
        print("keychain-bench-floor: not built beside the benchmark (swift build -c release); /bin/true is the floor")
        return nil
    }
    return path
}

/// A program built beside this one (`swift build -c release` builds them all), or nil.
func benchmarkProgram(_ name: String) -> String? {
    let path = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent(name).path
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}

/// The command through a per-user securityd, the desktop's case: the daemon and the command run as
/// the same user, so the command does not fork to protect its memory. Run as root, the benchmark's own
/// daemon figures are the system daemon's case; this part then runs as nobody, in a copy of the
/// benchmark started with setpriv (its spawns are timed there, so setpriv's own start is not counted).
func measureCommandThroughPerUserDaemon(samples: Int) {
    guard samples > 0, geteuid() == 0 else { return }
    let setpriv = "/usr/bin/setpriv"
    guard FileManager.default.isExecutableFile(atPath: setpriv) else {
        print("the command through a per-user securityd: no \(setpriv) to run it as another user, skipped")
        return
    }
    let copy = Process()
    copy.executableURL = URL(fileURLWithPath: setpriv)
    copy.arguments = [
        "--reuid=65534", "--regid=65534", "--clear-groups", "--",
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path, "--per-user-command-only",
        "--command-samples", String(samples),
    ]
    copy.environment = ["PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"]
    fflush(nil)
    do {
        try copy.run()
    } catch {
        fail("cannot run the per-user command benchmark as nobody: \(error)")
    }
    copy.waitUntilExit()
    if copy.terminationStatus != 0 { fail("the per-user command benchmark failed (\(copy.terminationStatus))") }
}

let embeddedCommand = measureCommand(samples: options.commandSamples)
DaemonBenchmark(root: root + "/securityd", samples: options.samples, writeSamples: options.writeSamples).run(
    embeddedCommandMedian: embeddedCommand, commandSamples: options.commandSamples)
measureCommandThroughPerUserDaemon(samples: options.commandSamples)

// Growth of the SecItem lookup from 1,000 items to each larger size measured.
if let base = lookupMedians[1_000] {
    for size in options.sizes.sorted() where size > 1_000 {
        guard let median = lookupMedians[size] else { continue }
        print(String(format: "lookup growth from 1000 to %d items: %.2f× (target ≤ 1.5×)", size, median / base))
    }
}

measurePasscode()
print("")
KeyBenchmark(samples: min(options.samples, 500)).run()
print("")
BackupBenchmark(sizes: options.backupSizes, directory: root).run()
print("")
TPMBenchmark(directory: root, samples: options.samples).run()

/// Unlock cost (one derivation at the calibrated cost), and what a copy of the keychain directory *with*
/// its device root costs someone guessing offline: derivations per second on every core of this
/// machine, for the KDF used now and for the PBKDF2 calibrated to 90 ms that it replaced.
func measurePasscode() {
    let passcode = SecureBytes(copying: Array("123456".utf8))
    let function = PasscodeFunction.calibrated()
    var unlock = Latencies()
    for _ in 0..<5 { unlock.measure { _ = try? function.derive(passcode, salt: Data(count: 16)) } }
    print("unlock: one passcode derivation, \(function): \(format(unlock.median)) (never below OWASP's scrypt minimum)")

    // The calibration the keychain used before scrypt: PBKDF2 iterations for 90 ms, at least 50,000.
    let probe = PasscodeFunction.seconds(for: .pbkdf2(iterations: 20_000))
    let iterations = UInt32(max(50_000, min(50_000_000, (20_000 * 0.09 / max(probe, 1e-6)).rounded())))
    let cores = ProcessInfo.processInfo.activeProcessorCount
    for (name, candidate) in [
        ("now", function), ("before (PBKDF2 at 90 ms)", PasscodeFunction.pbkdf2(iterations: iterations)),
    ] {
        let rate = guessesPerSecond(candidate, threads: cores, seconds: 3)
        print(
            String(
                format: "offline guesses per second on %d cores, %@, %@: %.1f (every 6-digit passcode in %.1f h)",
                cores, name, "\(candidate)", rate, 1e6 / rate / 3600))
    }
}

func guessesPerSecond(_ function: PasscodeFunction, threads: Int, seconds: Double) -> Double {
    let count = Mutex(0)
    let start = DispatchTime.now().uptimeNanoseconds
    let deadline = start + UInt64(seconds * 1e9)
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
        let guess = SecureBytes(copying: Array("\(thread)".utf8))
        while DispatchTime.now().uptimeNanoseconds < deadline {
            _ = try? function.derive(guess, salt: Data(count: 16))
            count.withLock { $0 += 1 }
        }
    }
    return Double(count.withLock { $0 }) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
}
