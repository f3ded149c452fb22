/// Equal when the bytes are, compared in constant time (answers that hold secrets are compared).
extension SecureBytes: Equatable {
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool { lhs.constantTimeEquals(rhs) }
}
