import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A stand-in for `pinentry` that speaks its Assuan protocol and answers GETPIN as told (the answer can
/// be changed between prompts), writing every command it receives to a transcript: what a person
/// would see (the reason) can be checked, and no prompt ever appears.
public final class FakePinentry {
    public enum Answer {
        case passcode(String)
        case cancel
        /// Exits without answering (a prompt program that crashes).
        case vanish
        /// Answers OK with no passcode (a person pressing Enter).
        case empty
        /// Greets, then exits before anything is asked.
        case leaveAtOnce
        /// Answers, then stays after BYE, ignoring SIGTERM and the end of its input.
        case linger
    }

    public let directory: String
    public let path: String
    public let transcriptPath: String
    private let answerPath: String

    public init(_ answer: Answer) throws {
        directory = NSTemporaryDirectory() + "pinentry-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        path = directory + "/pinentry"
        transcriptPath = directory + "/transcript"
        answerPath = directory + "/answer"
        let script = """
            #!/bin/sh
            echo "OK Pleased to meet you"
            [ "$(cat '\(answerPath)')" = leave ] && exit 0
            while IFS= read -r line; do
              printf '%s\\n' "$line" >> '\(transcriptPath)'
              case "$line" in
                GETPIN)
                  answer=$(cat '\(answerPath)')
                  case "$answer" in
                    pin\\ *) printf 'D %s\\nOK\\n' "${answer#pin }" ;;
                    cancel) echo 'ERR 83886179 Operation cancelled <Pinentry>' ;;
                    empty|linger) echo OK ;;
                    *) exit 3 ;;
                  esac ;;
                BYE)
                  if [ "$(cat '\(answerPath)')" = linger ]; then
                    trap '' TERM HUP PIPE
                    while :; do sleep 1; done
                  fi
                  echo "OK closing connection"
                  exit 0 ;;
                *) echo OK ;;
              esac
            done
            """
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        try set(answer)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// What the next prompts answer.
    public func set(_ answer: Answer) throws {
        let text: String
        switch answer {
        case .passcode(let passcode): text = "pin " + passcode.replacingOccurrences(of: "%", with: "%25")
        case .cancel: text = "cancel"
        case .vanish: text = "vanish"
        case .empty: text = "empty"
        case .leaveAtOnce: text = "leave"
        case .linger: text = "linger"
        }
        try text.write(toFile: answerPath, atomically: true, encoding: .utf8)
    }

    /// The commands received so far.
    public var transcript: String { (try? String(contentsOfFile: transcriptPath, encoding: .utf8)) ?? "" }
}
