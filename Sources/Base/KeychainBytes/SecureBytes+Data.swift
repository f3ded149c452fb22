import FoundationEssentials

extension SecureBytes {
    /// The bytes as a `Data` that views them where they are, with no copy made, for APIs that read
    /// `Data` (a decoder, a key import); the `Data` must not escape `body`, nor be changed in it.
    public func withBorrowedData<R, Failure: Error>(_ body: (Data) throws(Failure) -> R) throws(Failure) -> R {
        let result: Result<R, Failure> = withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                return Result { () throws(Failure) -> R in try body(Data()) }
            }
            let view = Data(
                bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: bytes.count, deallocator: .none)
            return Result { () throws(Failure) -> R in try body(view) }
        }
        return try result.get()
    }
}
