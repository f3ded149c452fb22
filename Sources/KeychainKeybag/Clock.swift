import Foundation

/// Wall-clock time, injectable so tests can step through the passcode delays without waiting.
public protocol Clock: Sendable {
    func now() -> Date
}

public struct SystemClock: Clock {
    public init() {}
    public func now() -> Date { Date() }
}
