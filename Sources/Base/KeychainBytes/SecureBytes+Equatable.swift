/// Equal when the bytes are, compared in constant time (answers that hold secrets are compared).
extension SecureBytes: Equatable {
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool { lhs.constantTimeEquals(rhs) }
}

/// Hashed by length alone: the bytes never go into a hash (equal buffers have equal lengths, so this
/// agrees with `==`).
extension SecureBytes: Hashable {
    public func hash(into hasher: inout Hasher) { hasher.combine(count) }
}
