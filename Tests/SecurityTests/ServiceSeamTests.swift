import Foundation
import KeychainCore
import KeychainEngine
import Security
import Synchronization
import XCTest

/// A keychain service that records the requests it is given (their names and queries, never secrets)
/// and hands them to another service, or answers them itself.
final class RecordingService: KeychainService, @unchecked Sendable {
    private let recorded = Mutex<[(name: String, query: [String: ItemValue]?)]>([])
    private let inner: (any KeychainService)?
    private let answer: @Sendable (KeychainRequest) throws -> KeychainAnswer

    init(forwardingTo inner: any KeychainService) {
        self.inner = inner
        answer = { try inner.perform($0) }
    }

    init(answering answer: @escaping @Sendable (KeychainRequest) throws -> KeychainAnswer) {
        inner = nil
        self.answer = answer
    }

    var names: [String] { recorded.withLock { $0.map(\.name) } }
    var queries: [[String: ItemValue]] { recorded.withLock { $0.compactMap(\.query) } }

    func perform(_ request: KeychainRequest) throws -> KeychainAnswer {
        let query: [String: ItemValue]? =
            switch request {
            case .add(let attributes): attributes
            case .copyMatching(let query), .update(let query, _), .delete(let query): query
            default: nil
            }
        recorded.withLock { $0.append((request.name, query)) }
        return try answer(request)
    }

    func administer(_ request: KeychainAdminRequest) throws -> KeychainAnswer {
        recorded.withLock { $0.append((request.name, nil)) }
        guard let inner else { throw KeychainCore.KeychainError.notAvailable("this recording answers no controls") }
        return try inner.administer(request)
    }
}

/// The SecItem API reaches a keychain only through `KeychainServices`: what the daemon's client will
/// plug into, and what these tests replace.
final class ServiceSeamTests: KeychainTestCase {
    override func tearDown() {
        KeychainServices.use(nil)
        super.tearDown()
    }

    func testEverySecItemCallGoesThroughTheService() throws {
        let service = RecordingService(
            forwardingTo: InProcessKeychainService(
                keychain: try Keychain(directory: keychain.directory + "-service"),
                client: ClientIdentity(accessGroups: ["TEAM.seam"])))
        defer { try? FileManager.default.removeItem(atPath: keychain.directory + "-service") }
        KeychainServices.use(service)
        let item = Item.password(service: "seam", account: "a", secret: "s1")
        XCTAssertEqual(Item.add(item), errSecSuccess)
        XCTAssertEqual(Item.secret(item), "s1")
        XCTAssertEqual(
            Item.update(
                Item.password(service: "seam", account: "a").filter { $0.key != "v_Data" },
                [kSecValueData as String: Data("s2".utf8)]), errSecSuccess)
        XCTAssertEqual(
            Item.delete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "seam"]),
            errSecSuccess)
        XCTAssertEqual(service.names, ["add", "copyMatching", "update", "delete"])
        XCTAssertEqual(service.queries.first?["svce"], .string("seam"))
        XCTAssertEqual(service.queries.first?["v_Data"], .data(Data("s1".utf8)))
        // The embedded keychain of the environment saw none of it.
        KeychainServices.use(nil)
        XCTAssertEqual(
            Item.copy([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "seam"]).0,
            errSecItemNotFound)
    }

    func testAnswersAndErrorsComeFromTheService() {
        // The environment names no usable keychain: only the service can answer.
        setenv("KEYCHAIN_HOME", "/dev/null/keychain", 1)
        let service = RecordingService { request in
            switch request {
            case .copyMatching: return .result(.data(Data("from-the-service".utf8)))
            case .add: throw KeychainCore.KeychainError.duplicateItem
            case .delete: throw KeychainCore.KeychainError.interactionNotAllowed("locked")
            default: return .done
            }
        }
        KeychainServices.use(service)
        XCTAssertEqual(Item.secret(Item.password(service: "any", account: "any")), "from-the-service")
        XCTAssertEqual(Item.add(Item.password(service: "any", account: "any")), errSecDuplicateItem)
        XCTAssertEqual(Item.delete([kSecClass as String: kSecClassGenericPassword]), errSecInteractionNotAllowed)
        XCTAssertEqual(service.names, ["copyMatching", "add", "delete"])
        KeychainServices.use(nil)
        XCTAssertEqual(Item.add(Item.password(service: "any", account: "any")), errSecNotAvailable)
    }

    /// What a request carries and an answer gives survive the one encoding the service seam's
    /// transports and the store share.
    func testValuesAndResultsSurviveEncoding() throws {
        let query: [String: ItemValue] = [
            "class": .string("genp"), "u_AuthCtx": .authenticationContext(AuthenticationContextReference()),
            "v_Data": .data(Data([0, 1, 2])),
            "accc": .accessControl(AccessControlPolicy(protection: .whenUnlocked, flags: 1)),
        ]
        let answer = ItemResult.array([.data(Data("x".utf8)), .dictionary(["acct": .string("a")])])
        var writer = ValueWriter()
        writer.dictionary(query)
        writer.result(answer)
        var reader = ValueReader(writer.data, limits: .authenticated)
        XCTAssertEqual(try reader.dictionary(), query)
        XCTAssertEqual(try reader.result(), answer)
        XCTAssertNoThrow(try reader.finish())
    }
}
