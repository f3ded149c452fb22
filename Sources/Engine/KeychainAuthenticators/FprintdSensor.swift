import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainDBus
import KeychainEngine
import KeychainKeybag
import KeychainSystem

/// A real fingerprint reader, through fprintd on the system bus (`net.reactivated.Fprint`): the
/// user's enrolled fingers decide whether a set is enrolled, and a prompt is a verification of any of
/// them (`VerifyStart("any")`), answered by fprintd's `VerifyStatus` signals.
///
/// fprintd tells which fingers are enrolled, not which prints: the set counts as changed (a new
/// enrollment secret, so `biometryCurrentSet` items die) when the list of fingers changes; a finger
/// deleted and enrolled again under the same name is not seen. The enrollment secret is kept as the
/// simulated sensor keeps its own: sealed under a key the device root derives, in the file `fprintd`.
/// Only signals from the connection that owns fprintd's name count (the bus sets every sender).
final class FprintdSensor: BiometricSensor, Sendable {
    private let address: String
    private let username: String
    private let directory: String
    private let path: String
    private let keybag: Keybag
    private let answerWait: Duration

    static let service = "net.reactivated.Fprint"
    static let deviceInterface = "net.reactivated.Fprint.Device"
    static let fileName = "fprintd"

    /// Touch ID: a fingerprint reader.
    var biometryType: Int { 1 }

    init(address: String, username: String, directory: String, keybag: Keybag, answerWait: Duration) {
        self.address = address
        self.username = username
        self.directory = directory
        path = PathText.join(directory, Self.fileName)
        self.keybag = keybag
        self.answerWait = answerWait
    }

    // MARK: Enrollment

    func enrollment() throws -> (enrolled: Bool, domainState: Data?) {
        guard let secret = try enrollmentSecret() else { return (false, nil) }
        return (true, try HMACKey(key: secret, pinned: false).authenticationCode(Data("domain state".utf8)))
    }

    func enrollmentSecret() throws -> SecureBytes? {
        let fingers = try enrolledFingers()
        guard !fingers.isEmpty else { return nil }
        return try secret(for: fingers)
    }

    func perform(_ command: BiometryCommand) throws -> BiometryStatus {
        guard command == .status else {
            throw KeychainError.invalidParameter(
                "this keychain uses the fingerprint reader through fprintd: enroll with fprintd-enroll, answer at the reader"
            )
        }
        let state = try enrollment()
        return BiometryStatus(
            enrolled: state.enrolled, pendingAnswers: [], standingAnswer: nil, domainState: state.domainState)
    }

    /// The user's enrolled fingers; none when there is no reader or fprintd does not run.
    private func enrolledFingers() throws -> [String] {
        let connection: DBusConnection
        do {
            connection = try DBusConnection(address: address)
        } catch {
            return []
        }
        guard let device = try? defaultDevice(on: connection) else { return [] }
        do {
            let reply = try connection.call(
                .call(
                    destination: Self.service, path: device, interface: Self.deviceInterface,
                    member: "ListEnrolledFingers", body: [.string(username)]))
            guard case .array(_, let names)? = reply.body.first else { return [] }
            return names.compactMap(\.text).sorted()
        } catch {
            return []  // net.reactivated.Fprint.Error.NoEnrolledPrints, or no permission to ask
        }
    }

    private func defaultDevice(on connection: DBusConnection) throws -> String? {
        let reply = try connection.call(
            .call(
                destination: Self.service, path: "/net/reactivated/Fprint/Manager",
                interface: "net.reactivated.Fprint.Manager", member: "GetDefaultDevice"))
        return reply.body.first?.text
    }

    private struct State: Codable {
        /// An HMAC of the enrolled fingers' names, under the key below: a change means a new set.
        var fingers: Data
        var sealedSecret: Data
    }

    private static let aad = Data("swift-keychain fprintd enrollment v1".utf8)

    /// The secret of this list of fingers: the one kept while the list is the same, a new one (written
    /// back) when it changed.
    private func secret(for fingers: [String]) throws -> SecureBytes {
        var mac = try keybag.authenticate(Data("swift-keychain fprintd enrollment key v1".utf8))
        defer { mac.resetBytes(in: 0..<mac.count) }
        let key = SecureBytes(copying: mac)
        let digest = try HMACKey(key: key, pinned: false).authenticationCode(Data(fingers.joined(separator: "\n").utf8))
        do {
            return try SecureFiles.withDirectoryLock(directory) {
                if let data = try SecureFiles.read(path), let state = try? JSONDecoder().decode(State.self, from: data),
                    state.fingers == digest,
                    let secret = try? AESGCM.openSecure(state.sealedSecret, key: key, authenticating: Self.aad)
                {
                    return secret
                }
                let secret = try SecureBytes(randomCount: 32)
                let state = State(
                    fingers: digest, sealedSecret: try AESGCM.seal(secret, key: key, authenticating: Self.aad))
                try SecureFiles.writeAtomically(try JSONEncoder().encode(state), to: path)
                return secret
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError.ioError("cannot keep the fingerprint enrollment: \(error)")
        }
    }

    // MARK: A prompt

    func prompt(reason: String) throws -> Result<Void, AuthenticationFailure> {
        let connection: DBusConnection
        do {
            connection = try DBusConnection(address: address)
        } catch {
            return .failure(.biometryNotAvailable)
        }
        guard let owner = try? connection.nameOwner(Self.service), let device = try? defaultDevice(on: connection)
        else { return .failure(.biometryNotAvailable) }
        do {
            try connection.addMatch(
                "type='signal',sender='\(Self.service)',path='\(device)',interface='\(Self.deviceInterface)',member='VerifyStatus'"
            )
            _ = try connection.call(
                .call(
                    destination: Self.service, path: device, interface: Self.deviceInterface, member: "Claim",
                    body: [.string(username)]))
        } catch {
            return .failure(.biometryNotAvailable)  // in use by someone else, or not allowed
        }
        defer {
            _ = try? connection.call(
                .call(destination: Self.service, path: device, interface: Self.deviceInterface, member: "Release"))
        }
        let started: DBusMessage
        do {
            started = try connection.call(
                .call(
                    destination: Self.service, path: device, interface: Self.deviceInterface, member: "VerifyStart",
                    body: [.string("any")]))
        } catch let error where error.code == .errorReply {
            return .failure(error.reason.contains("NoEnrolledPrints") ? .biometryNotEnrolled : .biometryNotAvailable)
        } catch {
            return .failure(.biometryNotAvailable)
        }
        defer {
            _ = try? connection.call(
                .call(destination: Self.service, path: device, interface: Self.deviceInterface, member: "VerifyStop"))
        }
        // Only what fprintd says about this verification counts: statuses from before it started (another
        // client's, sent while this one claimed the device) are dropped. fprintd numbers what it sends
        // in order, so those are the ones numbered before its answer to VerifyStart.
        let deadline = ContinuousClock.now + answerWait
        while ContinuousClock.now < deadline {
            guard let message = try? connection.receive(timeout: .milliseconds(200)) else { continue }
            guard message.kind == .signal, message.sender == owner, message.serial > started.serial,
                message.path == device,
                message.interface == Self.deviceInterface, message.member == "VerifyStatus",
                let result = message.body.first?.text
            else { continue }
            let done = message.body.count > 1 && message.body[1] == .boolean(true)
            switch result {
            case "verify-match": return .success(())
            case "verify-no-match": if done { return .failure(.authenticationFailed) }
            case "verify-retry-scan", "verify-swipe-too-short", "verify-finger-not-centered",
                "verify-remove-and-retry":
                continue  // the reader asks for another try
            default: return .failure(.biometryNotAvailable)  // disconnected, or an error of the reader
            }
        }
        return .failure(.systemCancel)
    }
}
