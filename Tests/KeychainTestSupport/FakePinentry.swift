import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A stand-in for `pinentry` that speaks its Assuan protocol and answers GETPIN as told, writing every
/// command it receives to a transcript: what a person would see (the reason) can be checked, and no
/// prompt ever appears.
public final class FakePinentry {
    public enum Answer {
        case passcode(String)
        case cancel
        /// Exits without answering (a prompt program that crashes).
        case vanish
    }

    public let directory: String
    public let path: String
    public let transcriptPath: String

    public init(_ answer: Answer) throws {
        directory = NSTemporaryDirectory() + "pinentry-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        path = directory + "/pinentry"
        transcriptPath = directory + "/transcript"
        let reply: String
        switch answer {
        case .passcode(let passcode):
            let escaped = passcode.replacingOccurrences(of: "%", with: "%25")
            reply = "printf 'D %s\\n' '\(escaped)'; echo OK"
        case .cancel: reply = "echo 'ERR 83886179 Operation cancelled <Pinentry>'"
        case .vanish: reply = "exit 3"
        }
        let script = """
            #!/bin/sh
            echo "OK Pleased to meet you"
            while IFS= read -r line; do
              printf '%s\\n' "$line" >> '\(transcriptPath)'
              case "$line" in
                GETPIN) \(reply) ;;
                BYE) echo "OK closing connection"; exit 0 ;;
                *) echo OK ;;
              esac
            done
            """
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// The commands received so far.
    public var transcript: String { (try? String(contentsOfFile: transcriptPath, encoding: .utf8)) ?? "" }
}
