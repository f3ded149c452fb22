import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reading secrets: from the terminal without echo, or from standard input when it is not a terminal.
enum Terminal {
    static var inputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// Prompts on standard error and reads one line from the terminal with echo turned off.
    static func readSecret(prompt: String) -> String? {
        // Echo goes off before the prompt appears, and without flushing input: whatever is typed
        // once the prompt shows must be neither echoed nor thrown away.
        var original = termios()
        let canSilence = tcgetattr(STDIN_FILENO, &original) == 0
        if canSilence {
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ECHONL)
            _ = tcsetattr(STDIN_FILENO, TCSANOW, &silent)
        }
        defer {
            if canSilence { _ = tcsetattr(STDIN_FILENO, TCSANOW, &original) }
        }
        FileHandle.standardError.write(Data(prompt.utf8))
        return readLine(strippingNewline: true)
    }

    /// Prompts and reads one line with echo (for yes/no questions).
    static func ask(_ prompt: String) -> String? {
        FileHandle.standardError.write(Data(prompt.utf8))
        return readLine(strippingNewline: true)
    }

    /// All of standard input, without one trailing newline: a password piped in by a script.
    static func readStandardInput() -> Data {
        var data = FileHandle.standardInput.readDataToEndOfFile()
        if data.last == UInt8(ascii: "\n") { data.removeLast() }
        if data.last == UInt8(ascii: "\r") { data.removeLast() }
        return data
    }
}
