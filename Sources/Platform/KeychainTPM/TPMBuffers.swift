import CTSS2
import Foundation
import KeychainBytes

/// The TSS's sized buffers (`UINT16 size; BYTE buffer[N]`) import into Swift as a size and an N-tuple;
/// these copy bytes in and out of them with the bounds checked.
enum TPMBuffers {
    /// Copies `bytes` into `tuple`, which holds at most `MemoryLayout.size(ofValue: tuple)` bytes.
    static func fill<Tuple>(_ tuple: inout Tuple, size: inout UInt16, from bytes: UnsafeRawBufferPointer) throws {
        let capacity = MemoryLayout<Tuple>.size
        guard bytes.count <= capacity else {
            throw TPMError(.failed, "\(bytes.count) bytes do not fit a TPM buffer of \(capacity)")
        }
        withUnsafeMutableBytes(of: &tuple) { target in
            if let base = bytes.baseAddress, bytes.count > 0 {
                target.baseAddress?.copyMemory(from: base, byteCount: bytes.count)
            }
        }
        size = UInt16(bytes.count)
    }

    static func fill<Tuple>(_ tuple: inout Tuple, size: inout UInt16, from data: Data) throws {
        try data.withUnsafeBytes { try fill(&tuple, size: &size, from: $0) }
    }

    /// The first `size` bytes of `tuple`, as plain data (public values only).
    static func data<Tuple>(_ tuple: Tuple, size: UInt16) -> Data {
        withUnsafeBytes(of: tuple) { Data($0.prefix(Int(size))) }
    }

    /// The first `size` bytes of `tuple` in wiped memory, for a secret the TPM returned.
    static func secure<Tuple>(_ tuple: Tuple, size: UInt16) -> SecureBytes {
        withUnsafeBytes(of: tuple) { SecureBytes(copying: $0.prefix(Int(size))) }
    }

    /// Overwrites a structure that held a secret before it goes out of scope.
    static func wipe<Value>(_ value: inout Value) {
        withUnsafeMutableBytes(of: &value) { bytes in
            if let base = bytes.baseAddress { explicit_bzero(base, bytes.count) }
        }
    }
}
