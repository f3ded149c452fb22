import Foundation

/// A passcode in a request travels to the daemon as bytes: the encoder's copy is as short-lived as the
/// message it builds; the decoded bytes go straight back into wiped memory.
extension SecureBytes: Codable {
    public convenience init(from decoder: any Decoder) throws {
        var bytes = try decoder.singleValueContainer().decode(Data.self)
        defer { bytes.resetBytes(in: 0..<bytes.count) }
        self.init(copying: bytes)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try withUnsafeBytes { try container.encode(Data($0)) }
    }
}

/// Equal when the bytes are, compared in constant time (answers that hold secrets are compared).
extension SecureBytes: Equatable {
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool { lhs.constantTimeEquals(rhs) }
}
