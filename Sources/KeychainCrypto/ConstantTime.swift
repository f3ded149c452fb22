import COpenSSL
import Foundation

/// Comparisons of MACs and tags whose time does not depend on where the inputs first differ.
public enum ConstantTime {
    public static func equal(_ first: Data, _ second: Data) -> Bool {
        guard first.count == second.count else { return false }
        guard !first.isEmpty else { return true }
        return first.withUnsafeBytes { mine in
            second.withUnsafeBytes { theirs in
                CRYPTO_memcmp(mine.baseAddress, theirs.baseAddress, first.count) == 0
            }
        }
    }
}
