import FoundationEssentials

/// Comparisons of MACs, tags and secrets whose time does not depend on where the inputs first differ:
/// every byte is read and the differences are gathered with OR, so there is no early exit to time.
public enum ConstantTime {
    public static func equal(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) -> Bool {
        guard first.count == second.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<first.count { difference |= first[index] ^ second[index] }
        return difference == 0
    }

    public static func equal(_ first: Data, _ second: Data) -> Bool {
        first.withUnsafeBytes { mine in second.withUnsafeBytes { theirs in equal(mine, theirs) } }
    }
}
