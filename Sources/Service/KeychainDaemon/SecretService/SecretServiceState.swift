import Foundation
import KeychainBytes
import KeychainCore
import Synchronization

/// What the Secret Service keeps for one keychain besides its items: the policy for unregistered
/// programs, the user's answers for each executable, the collections made over the bus and the
/// aliases. One authenticated file beside the keychain (`secret-service.state`): a same-user process
/// that writes "allow" into it makes it fail its check, and the daemon then refuses every
/// unregistered program until the file is removed.
final class SecretServiceState: Sendable {
    struct Decision: Codable, Equatable {
        var executablePath: String
        /// SHA-256 of the executable, hex.
        var executableDigest: String
        var allowed: Bool
    }

    struct Collection: Codable, Equatable {
        var id: String
        var label: String
        var created: Date
        var modified: Date
        /// The access group of the app that made it: only an app of that group deletes it. Nil for the
        /// default collection, which is never deleted.
        var creator: String? = nil
    }

    struct Document: Codable, Equatable {
        static let currentFormat = 1
        var format = Document.currentFormat
        var policy = SecretServicePolicy.standard
        var decisions: [Decision] = []
        var collections: [Collection] = [
            Collection(
                id: SecretServiceStore.defaultCollection, label: "Login", created: Date(timeIntervalSince1970: 0),
                modified: Date(timeIntervalSince1970: 0))
        ]
        var aliases: [String: String] = ["default": SecretServiceStore.defaultCollection]

        /// Adds a collection labelled `label`; its id is made from the label (its letters and digits,
        /// numbered when taken). Returns the id.
        mutating func addCollection(label: String, creator: String?) throws -> String {
            guard collections.count < SecretServiceState.maximumCollections else {
                throw KeychainError.invalidParameter("\(SecretServiceState.maximumCollections) collections at most")
            }
            let lowered = String(
                String.UnicodeScalarView(
                    label.lowercased().unicodeScalars.filter { $0.isASCII && CharacterSet.alphanumerics.contains($0) }
                        .prefix(32)))
            let base = lowered.isEmpty ? "collection" : lowered
            var id = base
            var number = 1
            while collections.contains(where: { $0.id == id }) {
                number += 1
                id = base + "_" + String(number)
            }
            let now = Date()
            collections.append(Collection(id: id, label: label, created: now, modified: now, creator: creator))
            return id
        }
    }

    static let fileName = "secret-service.state"
    /// Bounds on what callers can make the file hold.
    static let maximumCollections = 64
    static let maximumDecisions = 1_024

    private let file: AuthenticatedFile
    private let document: Mutex<Result<Document, KeychainError>>
    /// Executables (path and digest) refused since the daemon started: a no is not written down, since
    /// a prompt that ends without an answer (no turn in time, no one there) looks the same as a cancel;
    /// held here, it keeps a refused program from making the user be asked again and again.
    private let refusals = Mutex<Set<String>>([])

    func refuse(_ identity: String) { refusals.withLock { if $0.count < 4_096 { $0.insert(identity) } } }
    func isRefused(_ identity: String) -> Bool { refusals.withLock { $0.contains(identity) } }

    init(directory: String, authenticate: @escaping @Sendable (Data) throws -> Data) {
        file = AuthenticatedFile(
            path: (directory as NSString).appendingPathComponent(Self.fileName), name: "the Secret Service state",
            authenticate: authenticate)
        document = Mutex(Self.load(file))
    }

    private static func load(_ file: AuthenticatedFile) -> Result<Document, KeychainError> {
        switch file.read() {
        case .failure(let error):
            DaemonLog.error("\(file.path): \(error.reason)")
            return .failure(error)
        case .success(nil):
            return .success(Document())
        case .success(let bytes?):
            guard let document = try? JSONDecoder().decode(Document.self, from: bytes),
                document.format == Document.currentFormat
            else { return .failure(.notAvailable("the Secret Service state cannot be read")) }
            return .success(document)
        }
    }

    /// The current document; an error when the file fails its check.
    func read() throws(KeychainError) -> Document { try document.withLock { $0 }.get() }

    /// Changes the document and writes it, all or nothing.
    func change<T>(_ body: (inout Document) throws -> T) throws -> T {
        try document.withLock { held in
            var changed = try held.get()
            let result = try body(&changed)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            do {
                try file.write(try encoder.encode(changed))
            } catch let error as KeychainError {
                throw error
            } catch {
                throw KeychainError.ioError("cannot write the Secret Service state: \(error)")
            }
            held = .success(changed)
            return result
        }
    }
}
