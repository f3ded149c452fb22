import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto
import KeychainEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Asks a person for the device passcode through `pinentry`, GnuPG's standard prompt program (a
/// Debian package, with terminal and desktop variants), speaking its Assuan protocol: the prompt shows
/// the app's reason, and the passcode comes back into wiped memory, never through Foundation's buffers.
///
/// Which program runs is the keychain's owner's choice, never a client's: the daemon's `--pinentry`,
/// or, embedded, `KEYCHAIN_PINENTRY` (a process runs its own prompt either way). The program is
/// started with no signal blocked or ignored (the daemon blocks its stop signals in every thread), talks
/// over a socket pair (so that a program gone away is an error, never a SIGPIPE), and is killed when
/// the conversation is over and it has not left within a second.
struct PinentryPrompt: PasscodePrompt {
    let program: String
    /// How long a person has to answer.
    var timeout: Duration = .seconds(120)

    /// GnuPG's error code for a canceled operation (`GPG_ERR_CANCELED`), in the low 16 bits of an ERR.
    private static let canceled = 99
    /// The longest passcode taken; a longer answer is refused.
    static let maximumPasscode = 1_024

    func askPasscode(reason: String) -> Result<SecureBytes, AuthenticationFailure> {
        askPasscode(reason: reason, terminal: nil)
    }

    /// With `terminal`, the program is told it (Assuan's `OPTION ttyname`, as gpg-agent tells it the
    /// client's): a terminal pinentry, or one that finds no display, asks there.
    func askPasscode(reason: String, terminal: String?) -> Result<SecureBytes, AuthenticationFailure> {
        var sockets: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &sockets) == 0 else {
            return .failure(.authenticationFailed)
        }
        guard let child = spawn(talkingOver: sockets[1]) else {
            close(sockets[0])
            close(sockets[1])
            return .failure(.authenticationFailed)
        }
        close(sockets[1])
        let session = Session(socket: sockets[0], deadline: ContinuousClock.now + timeout)
        let answer = session.converse(reason: reason, terminal: terminal)
        session.close()
        Self.reap(child)
        return answer
    }

    /// Starts the program with the socket as its standard input and output, standard error to
    /// /dev/null, an empty signal mask and every signal at its default.
    private func spawn(talkingOver socket: Int32) -> pid_t? {
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { return nil }
        defer { posix_spawn_file_actions_destroy(&actions) }
        guard posix_spawnattr_init(&attributes) == 0 else { return nil }
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        var all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        guard posix_spawn_file_actions_adddup2(&actions, socket, 0) == 0,
            posix_spawn_file_actions_adddup2(&actions, socket, 1) == 0,
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) == 0,
            posix_spawnattr_setsigmask(&attributes, &none) == 0,
            posix_spawnattr_setsigdefault(&attributes, &all) == 0,
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0
        else { return nil }
        var pid: pid_t = 0
        let path = strdup(program)
        defer { free(path) }
        var arguments: [UnsafeMutablePointer<CChar>?] = [path, nil]
        guard posix_spawn(&pid, program, &actions, &attributes, &arguments, environ) == 0 else { return nil }
        return pid
    }

    /// Waits up to a second for the program to leave, then kills it; never leaves a zombie.
    private static func reap(_ pid: pid_t) {
        var status: Int32 = 0
        for _ in 0..<50 {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid || (result < 0 && errno != EINTR) { return }
            usleep(20_000)
        }
        kill(pid, SIGKILL)
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    }

    /// One conversation with the program: its greeting, the prompt's texts, GETPIN.
    private final class Session {
        let socket: Int32
        let deadline: ContinuousClock.Instant
        /// What was read and not consumed yet: allocated once, wiped whole at the end.
        private let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: 8_192, alignment: 1)
        private var filled = 0

        init(socket: Int32, deadline: ContinuousClock.Instant) {
            self.socket = socket
            self.deadline = deadline
            storage.initializeMemory(as: UInt8.self, repeating: 0)
        }

        func close() {
            SecureMemory.wipe(storage)
            storage.deallocate()
            Glibc.close(socket)
        }

        func converse(reason: String, terminal: String?) -> Result<SecureBytes, AuthenticationFailure> {
            // A program that goes away without answering is a cancel; one that answers otherwise than
            // the protocol says is a failure.
            switch expectOK() {
            case .ok: break
            case .gone: return Self.noAnswer()
            case .other: return Self.protocolFailure()
            }
            let description = reason.isEmpty ? "Enter the device passcode." : reason
            var options: [[UInt8]] = []
            if let terminal {
                options = [Array("OPTION ttyname=".utf8) + Self.escape(terminal), Array("OPTION ttytype=xterm".utf8)]
            }
            for command in options + [
                Array("SETTITLE Keychain".utf8), Array("SETDESC ".utf8) + Self.escape(description),
                Array("SETPROMPT Passcode:".utf8), Array("SETOK Continue".utf8),
            ] {
                guard send(command) else { return .failure(.userCancel) }
                switch expectOK() {
                case .ok: continue
                case .gone: return Self.noAnswer()
                case .other: return Self.protocolFailure()
                }
            }
            guard send(Array("GETPIN".utf8)) else { return .failure(.userCancel) }
            var pin: [UInt8] = []
            pin.reserveCapacity(PinentryPrompt.maximumPasscode)  // never grows: no unwiped copies
            defer { SecureMemory.wipe(&pin) }
            while var line = readLine() {
                defer { SecureMemory.wipe(&line) }
                if line.starts(with: Array("D ".utf8)) {
                    guard Self.unescape(line.dropFirst(2), into: &pin) else { return Self.protocolFailure() }
                } else if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) {
                    _ = send(Array("BYE".utf8))
                    // An empty passcode is no attempt (a stray Enter must not count as a wrong one).
                    return pin.isEmpty ? .failure(.userCancel) : .success(SecureBytes(copying: pin))
                } else if line.starts(with: Array("ERR ".utf8)) {
                    let code = Int(String(decoding: line.dropFirst(4).prefix { $0 != 32 }, as: UTF8.self)) ?? 0
                    if code & 0xffff != PinentryPrompt.canceled {
                        // The program could not ask anyone (pinentry-curses without a terminal, a desktop
                        // pinentry without a display): nobody answered, which is a cancel, as a program that
                        // ends without answering is. Its own words say why, for the operator.
                        KeychainLog.error(
                            "the passcode prompt could not ask anyone: \(Self.printable(line.dropFirst(4))) (a terminal pinentry needs a terminal, a desktop one a display)"
                        )
                    }
                    return .failure(.userCancel)
                } else if line.starts(with: Array("INQUIRE".utf8)) {
                    guard send(Array("CAN".utf8)) else { return .failure(.userCancel) }
                }
                // "S" status lines and "#" comments are skipped.
            }
            return Self.noAnswer()  // the program went away, or nobody answered in time
        }

        /// A program that went away, or a person who did not answer in time: a cancel.
        static func noAnswer() -> Result<SecureBytes, AuthenticationFailure> {
            KeychainLog.error("the passcode prompt ended or timed out without an answer: taken as a cancel")
            return .failure(.userCancel)
        }

        /// A program that answers otherwise than the protocol says: a failure (not a cancel: something is
        /// wrong with the prompt, not with the person), logged for the operator.
        static func protocolFailure() -> Result<SecureBytes, AuthenticationFailure> {
            KeychainLog.error("the passcode prompt program did not answer as pinentry's protocol says; refused")
            return .failure(.authenticationFailed)
        }

        /// A program's message, cut to a line of printable ASCII for the log.
        static func printable(_ bytes: ArraySlice<UInt8>) -> String {
            String(decoding: bytes.prefix(200).map { (32..<127).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        }

        private func send(_ line: [UInt8]) -> Bool {
            let bytes = line + [10]
            var written = 0
            while written < bytes.count {
                let count = bytes[written...].withUnsafeBytes {
                    Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return false }
                written += count
            }
            return true
        }

        private enum Reply { case ok, other, gone }

        private func expectOK() -> Reply {
            while var line = readLine() {
                defer { SecureMemory.wipe(&line) }
                if line.first == UInt8(ascii: "#") || line.starts(with: Array("S ".utf8)) { continue }
                return line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) ? .ok : .other
            }
            return .gone
        }

        /// The next line (without its newline), or nil at the end, after the deadline, or past the
        /// buffer (Assuan's lines are at most 1,000 bytes).
        private func readLine() -> [UInt8]? {
            while true {
                if let newline = storage[..<filled].firstIndex(of: 10) {
                    let line = Array(storage[..<newline])
                    let rest = filled - (newline + 1)
                    // Moved down over the line, then the tail wiped: the line may hold the passcode.
                    if rest > 0, let base = storage.baseAddress { memmove(base, base + newline + 1, rest) }
                    SecureMemory.wipe(UnsafeMutableRawBufferPointer(rebasing: storage[rest..<filled]))
                    filled = rest
                    return line
                }
                guard filled < storage.count else { return nil }
                let remaining = deadline - ContinuousClock.now
                guard remaining > .zero else { return nil }
                var entry = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
                let (seconds, attoseconds) = remaining.components
                let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
                let ready = poll(&entry, 1, milliseconds)
                if ready < 0, errno == EINTR { continue }
                guard ready > 0 else { return nil }
                let free = UnsafeMutableRawBufferPointer(rebasing: storage[filled...])
                let count = read(socket, free.baseAddress, free.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return nil }
                filled += count
            }
        }

        /// Assuan's escaping of a parameter: %, CR, LF and other control characters as %XX, the rest as
        /// its UTF-8 bytes; at most 900 bytes escaped (the line stays under the protocol's 1,000), cut
        /// between characters.
        static func escape(_ text: String) -> [UInt8] {
            var out: [UInt8] = []
            for character in text.unicodeScalars {
                var piece: [UInt8] = []
                if character.value < 32 || character.value == 127 || character == "%"
                    || (0x80..<0xa0).contains(character.value)
                {
                    let byte = UInt8(truncatingIfNeeded: character.value < 0x80 ? character.value : 0x3f)
                    let digits = Array("0123456789ABCDEF".utf8)
                    piece = [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]]
                } else {
                    piece = Array(String(character).utf8)
                }
                guard out.count + piece.count <= 900 else { break }
                out += piece
            }
            return out
        }

        /// Undoes %XX escapes of a data line into `pin`; false on a malformed escape or a passcode
        /// over the limit.
        static func unescape(_ line: ArraySlice<UInt8>, into pin: inout [UInt8]) -> Bool {
            var index = line.startIndex
            while index < line.endIndex {
                guard pin.count < PinentryPrompt.maximumPasscode else { return false }
                let byte = line[index]
                if byte == UInt8(ascii: "%") {
                    guard index + 2 < line.endIndex, let high = hex(line[index + 1]), let low = hex(line[index + 2])
                    else { return false }
                    pin.append(high << 4 | low)
                    index += 3
                } else {
                    pin.append(byte)
                    index += 1
                }
            }
            return true
        }

        private static func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }
}
