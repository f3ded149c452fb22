import COpenSSL
import CProcessControl

#if canImport(Glibc)
    import Glibc
#endif

/// Wiping and pinning memory that held secrets.
public enum SecureMemory {
    /// Overwrites `buffer` with zeros in a way the optimiser cannot remove.
    public static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        OPENSSL_cleanse(base, buffer.count)
    }

    /// Wipes a byte array in place (its storage, not a copy).
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { wipe($0) }
    }

    /// For programs that own their `main` (the `security` command, the daemon), before they read any
    /// secret: no core dumps, and no reading of this process's memory by other processes of the same
    /// user (ptrace, `/proc/<pid>/mem`), which a non-dumpable process refuses. Root still can. Returns
    /// false if the kernel refused either.
    @discardableResult
    public static func protectProcess() -> Bool {
        var noCores = rlimit(rlim_cur: 0, rlim_max: 0)
        let coresOff = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCores) == 0
        return process_control_forbid_dumps() == 0 && coresOff
    }

    /// Whether `protectProcess` is in effect.
    public static var processIsProtected: Bool { process_control_is_dumpable() == 0 }
}
