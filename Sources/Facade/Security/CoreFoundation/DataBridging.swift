import Foundation

extension NSData {
    /// The bytes as `Data`, in one copy. On this Foundation, `as Data` on an `NSData` walks the bytes
    /// one at a time through `Sequence` (a retain and a `length` call each): a 256-byte signature costs
    /// tens of microseconds that way, more than verifying it.
    var contiguousData: Data { length == 0 ? Data() : Data(bytes: bytes, count: length) }
}
