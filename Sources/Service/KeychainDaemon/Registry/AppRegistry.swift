import Foundation
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainKeybag
import KeychainSystem
import Synchronization

/// The apps one keychain knows (`security app`): a file beside the keychain, authenticated under the
/// device root, so that a copy edited by hand (or by anything but this daemon) is refused as a whole
/// rather than trusted in part.
///
/// File: the hex MAC of the document, a newline, then the document (JSON, keys sorted).
final class AppRegistry: Sendable {
    private let file: AuthenticatedFile
    var path: String { file.path }
    /// The entries as last read, with the identity of the file they were read from: reread when the
    /// file changes underneath.
    private let state = Mutex<(file: FileIdentity?, entries: Result<[AppRegistration], KeychainError>)?>(nil)
    /// When the file was last compared with what is held (monotonic nanoseconds). Only this daemon
    /// writes the file, and it updates what it holds as it does; the comparison is for a file changed
    /// behind its back, which is then noticed within `recheckInterval`, not on every request.
    private let lastCheck = Atomic<UInt64>(0)
    private static let recheckInterval: UInt64 = 500_000_000

    static let fileName = "apps.registry"

    init(directory: String, authenticate: @escaping @Sendable (Data) throws -> Data) {
        file = AuthenticatedFile(
            path: (directory as NSString).appendingPathComponent(Self.fileName), name: "the app registry",
            authenticate: authenticate)
    }

    /// The registered apps; an error when the file cannot be read or fails its check.
    func entries() -> Result<[AppRegistration], KeychainError> {
        let now = KeychainDaemon.monotonicNow
        let last = lastCheck.load(ordering: .relaxed)
        if last != 0, now &- last < Self.recheckInterval, let held = state.withLock({ $0?.entries }) { return held }
        let identity = SecureFiles.identity(of: path)
        lastCheck.store(now, ordering: .relaxed)
        return state.withLock { state in
            if let state, state.file == identity { return state.entries }
            let entries = load()
            if case .failure(let error) = entries { DaemonLog.error("app registry \(path): \(error.reason)") }
            state = (identity, entries)
            return entries
        }
    }

    /// Adds or replaces the entry for `app.executablePath`.
    func register(_ app: AppRegistration) throws {
        try change { apps in
            apps.removeAll { $0.executablePath == app.executablePath }
            apps.append(app)
        }
    }

    /// Removes the entry for `executablePath`; `.itemNotFound` when there is none.
    func remove(executablePath: String) throws {
        try change { apps in
            let before = apps.count
            apps.removeAll { $0.executablePath == executablePath }
            if apps.count == before { throw KeychainError(.itemNotFound, "no app is registered at \(executablePath)") }
        }
    }

    private func change(_ body: (inout [AppRegistration]) throws -> Void) throws {
        try state.withLock { state in
            var apps: [AppRegistration]
            switch load() {
            case .success(let current): apps = current
            case .failure(let error):
                throw KeychainError(
                    error.code,
                    "\(error.reason); remove \(path) to start a new registry (every app then registers again)")
            }
            try body(&apps)
            try file.write(try Self.encode(apps))
            state = (SecureFiles.identity(of: path), .success(apps))
        }
    }

    private func load() -> Result<[AppRegistration], KeychainError> {
        let document: Data
        switch file.read() {
        case .failure(let error): return .failure(error)
        case .success(nil): return .success([])
        case .success(let read?): document = read
        }
        do {
            let file = try JSONDecoder().decode(RegistryFile.self, from: document)
            guard file.format == RegistryFile.currentFormat else {
                return .failure(
                    .notAvailable("the app registry has format \(file.format), not \(RegistryFile.currentFormat)"))
            }
            return .success(file.apps)
        } catch {
            return .failure(.notAvailable("the app registry's document cannot be read"))
        }
    }

    private static func encode(_ apps: [AppRegistration]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        do {
            return try encoder.encode(RegistryFile(format: RegistryFile.currentFormat, apps: apps))
        } catch {
            throw KeychainError.internalError("cannot encode the app registry")
        }
    }
}

private struct RegistryFile: Codable {
    static let currentFormat = 1
    var format: Int
    var apps: [AppRegistration]
}
