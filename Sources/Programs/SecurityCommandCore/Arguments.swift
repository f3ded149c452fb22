import FoundationEssentials
import KeychainCore

#if canImport(Glibc)
    import Glibc
#endif

/// One command-line argument as the kernel passed it: bytes, which need not be UTF-8. macOS's command
/// stores an attribute given as bytes that are not text as those bytes, so two different byte strings
/// never become the same attribute.
public struct CommandArgument: Sendable {
    public let bytes: [UInt8]

    /// The text, with invalid UTF-8 repaired: for flags, verbs and messages, never for values stored.
    package var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Whether the bytes are valid UTF-8.
    package var isText: Bool { String(validating: bytes, as: UTF8.self) != nil }

    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public init(_ text: String) { bytes = Array(text.utf8) }

    /// This process's arguments after the program name, bytes as given.
    public static var processArguments: [CommandArgument] {
        (1..<Int(CommandLine.argc)).compactMap { index in
            CommandLine.unsafeArgv[index].map { pointer in
                CommandArgument(
                    Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer)).map { UInt8(bitPattern: $0) }))
            }
        }
    }
}

/// The options of one verb, parsed the way macOS's `security` (getopt) reads them: single-letter
/// flags, some taking a value, before any positional arguments.
package struct Arguments {
    /// Flag letter → value (empty for flags without a value).
    private var values: [Character: CommandArgument] = [:]
    /// Flags given with no value where one was optional (`-w` as the last argument: prompt).
    package private(set) var withoutValue: Set<Character> = []
    /// What is left after the options: in macOS, keychain names.
    package private(set) var positional: [CommandArgument] = []
    private(set) var longOptions: Set<String> = []
    private(set) var longValues: [String: String] = [:]

    package struct UsageError: Error {
        package let message: String
    }

    /// - Parameters:
    ///   - takingValue: letters that take a value.
    ///   - optionalValue: letters whose value may be missing when they come last.
    ///   - booleans: letters without a value.
    ///   - long: long options without a value; `longTakingValue`: long options with one.
    package init(
        _ arguments: [CommandArgument], takingValue: Set<Character>, optionalValue: Set<Character> = [],
        booleans: Set<Character> = [], long: Set<String> = [], longTakingValue: Set<String> = []
    ) throws(UsageError) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let text = argument.text
            index += 1
            if text == "--" {
                positional += arguments[index...]
                break
            }
            if text.hasPrefix("--") {
                let name = String(text.dropFirst(2))
                if long.contains(name) {
                    longOptions.insert(name)
                } else if longTakingValue.contains(name) {
                    guard index < arguments.count else { throw UsageError(message: "option --\(name) needs a value") }
                    longValues[name] = arguments[index].text
                    index += 1
                } else {
                    throw UsageError(message: "unknown option \(text)")
                }
                continue
            }
            guard argument.bytes.first == UInt8(ascii: "-"), argument.bytes.count > 1 else {
                positional.append(argument)
                continue
            }
            var position = 1
            while position < argument.bytes.count {
                let letter = Character(UnicodeScalar(argument.bytes[position]))
                position += 1
                if booleans.contains(letter) {
                    values[letter] = CommandArgument([])
                } else if takingValue.contains(letter) || optionalValue.contains(letter) {
                    if position < argument.bytes.count {
                        values[letter] = CommandArgument(Array(argument.bytes[position...]))
                        position = argument.bytes.count
                    } else if index < arguments.count {
                        values[letter] = arguments[index]
                        index += 1
                    } else if optionalValue.contains(letter) {
                        withoutValue.insert(letter)
                    } else {
                        throw UsageError(message: "option -\(letter) needs a value")
                    }
                } else {
                    throw UsageError(message: "unknown option -\(letter)")
                }
            }
        }
    }

    /// The flag's value as text (repaired where it is not UTF-8).
    package subscript(_ letter: Character) -> String? { values[letter]?.text }

    /// The flag's value as given.
    package func bytes(_ letter: Character) -> [UInt8]? { values[letter]?.bytes }

    /// The flag's value for an attribute: a string when it is text, else its bytes as data.
    package func attribute(_ letter: Character) -> ItemValue? {
        guard let value = values[letter] else { return nil }
        return value.isText ? .string(value.text) : .data(Data(value.bytes))
    }

    package func has(_ letter: Character) -> Bool { values[letter] != nil || withoutValue.contains(letter) }

    package func has(long name: String) -> Bool { longOptions.contains(name) }

    package func value(long name: String) -> String? { longValues[name] }
}
