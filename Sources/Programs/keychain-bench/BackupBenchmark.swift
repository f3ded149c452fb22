import Foundation
import KeychainBytes
import KeychainCrypto
import KeychainEngine
import KeychainKeybag
import KeychainStorage

/// Backup and restore of N items: items per second, the peak memory while each runs, and the ratio to
/// a floor measured in the same run (reading the same number of rows and one AES-256-GCM open and seal
/// per item, done directly; for restore, inserting as many rows in one transaction, with the same open
/// and seal). Then what the backup password costs a guesser offline.
struct BackupBenchmark {
    let sizes: [Int]
    let directory: String

    func run() {
        print("backup and restore (a device-bound backup, so the password's derivation is not counted):")
        for size in sizes {
            do {
                try measure(size)
            } catch {
                fail("backup benchmark at \(size) items: \(error)")
            }
        }
        let function = Keychain.backupPasswordFunction
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let rate = guessesPerSecond(function, threads: cores, seconds: 3)
        let passcode = guessesPerSecond(PasscodeFunction.calibrated(), threads: cores, seconds: 3)
        print(
            String(
                format:
                    "backup password, %@: %.1f offline guesses per second on %d cores (the passcode's: %.1f, and those need the device root too)",
                "\(function)", rate, cores, passcode))
    }

    /// Restores (or makes) a backup of `sizes[0]` items five times, and nothing else, for a profiler.
    func profile(restoring: Bool) {
        do {
            let home = directory + "/profile"
            let keychain = try filled(home, size: sizes.first ?? 1_000)
            defer { keychain.closeIdleConnections() }
            let file = directory + "/profile.skbk"
            _ = try keychain.createBackup(at: file, password: nil)
            for _ in 0..<5 {
                if restoring {
                    _ = try keychain.restoreBackup(from: file, password: nil)
                } else {
                    _ = try keychain.createBackup(at: file, password: nil)
                }
            }
        } catch {
            fail("\(restoring ? "restore" : "backup") profile: \(error)")
        }
    }

    /// A keychain of `size` items, added in chunks so that making it does not set the memory peak.
    private func filled(_ home: String, size: Int) throws -> Keychain {
        let keychain = try Keychain(directory: home)
        let client = ClientIdentity(accessGroups: ["TEAM.bench"])
        var next = 0
        while next < size {
            let chunk = (next..<min(size, next + 1_000)).map { index -> [String: ItemValue] in
                [
                    "class": .string("genp"), "svce": .string("bench.example.com"), "acct": .string("user-\(index)"),
                    "v_Data": .data(Data("token-\(index)-abcdefghijklmnop".utf8)),
                ]
            }
            try keychain.add(contentsOf: chunk, client: client)
            next += chunk.count
        }
        return keychain
    }

    private func measure(_ size: Int) throws {
        let home = directory + "/backup-\(size)"
        let keychain = try filled(home, size: size)
        defer {
            keychain.closeIdleConnections()
            try? FileManager.default.removeItem(atPath: home)
        }
        let file = directory + "/backup-\(size).skbk"
        defer { try? FileManager.default.removeItem(atPath: file) }

        let floor = try BackupFloor(keychain: keychain, directory: directory, count: size)
        defer { floor.close() }
        // Small keychains are measured in five rounds, each floor right beside what it is the floor of,
        // and the medians reported: one round of a few milliseconds is at the mercy of this machine's
        // noise. The peaks are those of the first round.
        let rounds = size <= 10_000 ? 5 : 1
        var readFloors: [Double] = []
        var backups: [Double] = []
        var insertFloors: [Double] = []
        var restores: [Double] = []
        var backupRatios: [Double] = []
        var restoreRatios: [Double] = []
        var backupPeak = 0
        var restorePeak = 0
        for round in 0..<rounds {
            readFloors.append(try time { try floor.readAll() })
            resetPeakMemory()
            backups.append(try time { _ = try keychain.createBackup(at: file, password: nil) })
            if round == 0 { backupPeak = peakMemory() }
            resetPeakMemory()
            restores.append(try time { _ = try keychain.restoreBackup(from: file, password: nil) })
            if round == 0 { restorePeak = peakMemory() }
            // After the restore: the index entries the floor holds in memory would count in its peak.
            try floor.loadIndexEntries()
            insertFloors.append(try time { try floor.insertAll() })
            try floor.emptyTarget()
            backupRatios.append(backups[round] / readFloors[round])
            restoreRatios.append(restores[round] / insertFloors[round])
        }
        let readFloor = median(readFloors)
        let backup = median(backups)
        let insertFloor = median(insertFloors)
        let restore = median(restores)
        // The same backup onto a new, empty keychain of the same device (its root): the floor's own case,
        // with no local items to remove first.
        let fresh = try Keychain(
            directory: home + "-new", options: KeychainOptions(deviceRootPath: home + "/device-root"))
        defer {
            fresh.closeIdleConnections()
            try? FileManager.default.removeItem(atPath: home + "-new")
        }
        let restoreNew = try time { _ = try fresh.restoreBackup(from: file, password: nil) }
        print(
            String(
                format:
                    "  %7d items: backup %@ (%.0f items/s, %.2f× its floor of %@, peak RSS %d MiB); restore %@ (%.0f items/s, %.2f× its floor of %@, peak RSS %d MiB), onto an empty keychain %@ (%.2f×) (targets ≤ 3×, < 64 MiB)",
                size, format(backup), Double(size) / backup, median(backupRatios), format(readFloor), backupPeak >> 20,
                format(restore), Double(size) / restore, median(restoreRatios), format(insertFloor), restorePeak >> 20,
                format(restoreNew), restoreNew / insertFloor))
        if rounds > 1 {
            print("           (medians of \(rounds) rounds; the ratios are each round's, then their median)")
        }
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    private func time(_ body: () throws -> Void) throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// Resets the kernel's peak-RSS mark for this process (`VmHWM`), so the next reading is the peak
    /// of what runs in between.
    private func resetPeakMemory() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    /// The process's peak resident memory since the last reset, in bytes.
    private func peakMemory() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return 0 }
        return kilobytes << 10
    }
}

/// The floor of a backup and a restore, on the keychain's own rows: reading every row of its database
/// with one AES-256-GCM open and one seal per row (a backup's floor), and inserting the same rows, index
/// entries and all, as they are read, into an empty database of the same schema in one transaction, with
/// the same open and seal (a restore's floor).
private final class BackupFloor {
    private let source: Connection
    private let target: Connection
    private let key: SecureBytes
    private let sealed: Data
    private let path: String

    init(keychain: Keychain, directory: String, count: Int) throws {
        source = try Connection(path: keychain.databasePath, create: false)
        path = directory + "/backup-floor-\(count).db"
        try? FileManager.default.removeItem(atPath: path)
        target = try Connection(path: path, create: true)
        try ItemStore(connection: target).prepareSchema()
        key = try SecureBytes(randomCount: 32)
        sealed = try AESGCM.seal(Data(repeating: 7, count: 96), key: key, authenticating: Data())
    }

    private func openAndSeal() throws {
        _ = try AESGCM.seal(try AESGCM.open(sealed, key: key, authenticating: Data()), key: key, authenticating: Data())
    }

    func readAll() throws {
        let store = ItemStore(connection: source)
        for itemClass in 1...4 {
            try store.forEachItem(itemClass: itemClass, tombstone: false) { _ in try openAndSeal() }
        }
    }

    /// Every row's index entries, read before the insert floor is timed: a restore reads its rows from
    /// the backup file whole, so the floor's reading of them must not cost it a query more per row.
    func loadIndexEntries() throws {
        let source = ItemStore(connection: self.source)
        var entries: [Int64: [Data]] = [:]
        for itemClass in 1...4 {
            try source.forEachItem(itemClass: itemClass, tombstone: false) { row in
                entries[row.rowID] = try source.indexDigests(rowID: row.rowID)
            }
        }
        indexEntries = entries
    }

    private var indexEntries: [Int64: [Data]] = [:]

    /// Streams the rows from the keychain's database into the empty one, in one transaction there.
    func insertAll() throws {
        let source = ItemStore(connection: self.source)
        try target.writeTransaction {
            let store = ItemStore(connection: target)
            for itemClass in 1...4 {
                try source.forEachItem(itemClass: itemClass, tombstone: false) { row in
                    try openAndSeal()
                    // The row as the keychain stores it: its columns and its index entries.
                    var copy = row
                    copy.indexDigests = indexEntries[row.rowID] ?? []
                    _ = try store.insert(copy)
                }
            }
        }
        indexEntries = [:]
    }

    /// Empties the database the insert floor fills, for another round.
    func emptyTarget() throws {
        try target.writeTransaction { try ItemStore(connection: target).deleteAll() }
    }

    func close() { try? FileManager.default.removeItem(atPath: path) }
}
