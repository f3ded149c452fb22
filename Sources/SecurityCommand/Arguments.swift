/// The options of one verb, parsed the way macOS's `security` (getopt) reads them: single-letter
/// flags, some taking a value, before any positional arguments.
struct Arguments {
    /// Flag letter → value ("" for flags without a value).
    private(set) var values: [Character: String] = [:]
    /// Flags given with no value where one was optional (`-w` as the last argument: prompt).
    private(set) var withoutValue: Set<Character> = []
    private(set) var positional: [String] = []
    private(set) var longOptions: Set<String> = []
    private(set) var longValues: [String: String] = [:]

    struct UsageError: Error {
        let message: String
    }

    /// - Parameters:
    ///   - takingValue: letters that take a value.
    ///   - optionalValue: letters whose value may be missing when they come last.
    ///   - booleans: letters without a value.
    ///   - long: long options without a value; `longTakingValue`: long options with one.
    init(
        _ arguments: [String], takingValue: Set<Character>, optionalValue: Set<Character> = [],
        booleans: Set<Character> = [], long: Set<String> = [], longTakingValue: Set<String> = []
    ) throws(UsageError) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                positional += arguments[index...]
                break
            }
            if argument.hasPrefix("--") {
                let name = String(argument.dropFirst(2))
                if long.contains(name) {
                    longOptions.insert(name)
                } else if longTakingValue.contains(name) {
                    guard index < arguments.count else { throw UsageError(message: "option --\(name) needs a value") }
                    longValues[name] = arguments[index]
                    index += 1
                } else {
                    throw UsageError(message: "unknown option \(argument)")
                }
                continue
            }
            guard argument.hasPrefix("-"), argument.count > 1 else {
                positional.append(argument)
                continue
            }
            var letters = Array(argument.dropFirst())
            while !letters.isEmpty {
                let letter = letters.removeFirst()
                if booleans.contains(letter) {
                    values[letter] = ""
                } else if takingValue.contains(letter) || optionalValue.contains(letter) {
                    if !letters.isEmpty {
                        values[letter] = String(letters)
                        letters.removeAll()
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

    subscript(_ letter: Character) -> String? { values[letter] }

    func has(_ letter: Character) -> Bool { values[letter] != nil || withoutValue.contains(letter) }

    func has(long name: String) -> Bool { longOptions.contains(name) }

    func value(long name: String) -> String? { longValues[name] }
}
