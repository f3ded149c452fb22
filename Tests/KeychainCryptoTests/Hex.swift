import Foundation

extension Data {
    /// Bytes from pairs of hex digits (test vectors as their documents print them).
    init(hex: String) {
        var bytes: [UInt8] = []
        var pending: UInt8?
        for digit in hex.compactMap({ $0.hexDigitValue }) {
            if let high = pending {
                bytes.append(high << 4 | UInt8(digit))
                pending = nil
            } else {
                pending = UInt8(digit)
            }
        }
        self.init(bytes)
    }

    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
