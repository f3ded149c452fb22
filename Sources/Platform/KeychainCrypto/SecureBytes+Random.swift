import KeychainBytes

extension SecureBytes {
    /// Fresh random bytes from OpenSSL's CSPRNG.
    public convenience init(randomCount count: Int, pinned: Bool = false) throws {
        try self.init(count: count, pinned: pinned) { buffer throws in
            try Random.fill(buffer)
        }
    }
}
