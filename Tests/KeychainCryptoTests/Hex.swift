import Foundation
import KeychainBytes

extension Data {
    /// Bytes from pairs of hex digits, as test-vector documents print them (spaces and line breaks
    /// between groups); empty, so that the test fails, when the vector is mistyped.
    init(hex: String) { self = Hex.decode(hex.filter { !$0.isWhitespace }) ?? Data() }

    var hex: String { Hex.encode(self) }
}
