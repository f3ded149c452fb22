import Foundation
import KeychainBytes
import KeychainCore
import Security
import SecurityCommandCore

/// `security biometry enroll | unenroll | match | nomatch | cancel | policy ANSWER | status`: the
/// simulated biometric sensor, driven as the iOS Simulator's Face ID menu drives its own. `match`,
/// `nomatch` and `cancel` answer the next prompt (one being waited for, or the next to come);
/// `policy` answers every prompt that way until `policy ask`, for tests that run unattended.
/// `security companion pair | unpair | match | …` drives a simulated companion device the same way.
struct BiometryVerbs {
    let session: Session
    /// `companion` rather than `biometry`.
    var companion = false

    private var verb: String { companion ? "companion" : "biometry" }
    /// The label of its failures: each device its own, so a message says which one failed.
    private var function: String { companion ? "SecKeychainCompanion" : "SecKeychainBiometry" }

    func run(_ arguments: [CommandArgument]) throws(Failure) {
        guard let action = arguments.first?.text else {
            throw .usage(verb: verb, message: "no \(verb) command given")
        }
        let rest = arguments.dropFirst().map(\.text)
        let command: BiometryCommand
        switch action {
        case "enroll" where !companion, "pair" where companion: command = .enroll
        case "unenroll" where !companion, "unpair" where companion: command = .unenroll
        case "status": command = .status
        case "match", "nomatch", "cancel":
            guard let answer = SensorAnswer(rawValue: action) else {
                throw .usage(verb: verb, message: "unknown answer \"\(action)\"")
            }
            command = .answer(answer)
        case "policy":
            guard rest.count == 1, let choice = rest.first else {
                throw .usage(verb: verb, message: "\(verb) policy takes match, nomatch, cancel or ask")
            }
            if choice == "ask" {
                command = .standingAnswer(nil)
            } else if let answer = SensorAnswer(rawValue: choice) {
                command = .standingAnswer(answer)
            } else {
                throw .usage(verb: verb, message: "\(verb) policy takes match, nomatch, cancel or ask")
            }
        default:
            throw .usage(verb: verb, message: "unknown \(verb) command \"\(action)\"")
        }
        if action != "policy", !rest.isEmpty {
            throw .usage(verb: verb, message: "\(verb) \(action) takes no arguments")
        }
        let status: BiometryStatus
        do {
            let service = try session.keychain()
            status = companion ? try service.companion(command) : try service.biometry(command)
        } catch let error as KeychainError {
            throw .keychain(error.osStatus, function: function, detail: error.reason)
        } catch {
            throw .keychain(errSecInternalComponent, function: function, detail: "\(error)")
        }
        guard command == .status else { return }
        print("\(companion ? "paired" : "enrolled"): \(status.enrolled ? "yes" : "no")")
        print(
            "answers waiting: \(status.pendingAnswers.isEmpty ? "none" : status.pendingAnswers.map(\.rawValue).joined(separator: ", "))"
        )
        print("standing answer: \(status.standingAnswer?.rawValue ?? "none (prompts wait for an answer)")")
        if let state = status.domainState {
            print("domain state: \(Hex.encode(state))")
        }
    }
}
