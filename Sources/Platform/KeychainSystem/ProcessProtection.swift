import CProcessControl

#if canImport(Glibc)
    import Glibc
#endif

/// What a program that holds secrets does to its own process before it reads any.
public enum ProcessProtection {
    /// For programs that own their `main` (the `security` command, the daemon), before they read any
    /// secret: no core dumps, and no reading of this process's memory by other processes of the same
    /// user (ptrace, `/proc/<pid>/mem`), which a non-dumpable process refuses. Root still can. Returns
    /// false if the kernel refused either.
    ///
    /// Fatal signals get their default action back: the Swift runtime's crash reporter would print
    /// registers and the memory they point to, and carry on after a signal another process sent.
    @discardableResult
    public static func protectProcess() -> Bool {
        let coresOff = forbidCoreFiles()
        return process_control_forbid_dumps() == 0 && coresOff
    }

    /// No core files, and no crash report of memory (fatal signals get their default action back);
    /// the process stays dumpable otherwise. Returns false if the kernel refused the limit.
    @discardableResult
    public static func forbidCoreFiles() -> Bool {
        var noCores = rlimit(rlim_cur: 0, rlim_max: 0)
        let coresOff = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCores) == 0
        for fatal in [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT] { _ = signal(fatal, SIG_DFL) }
        return coresOff
    }

    /// After `protectProcess`, for a program that is about to read secrets: forks, and returns in the
    /// child. The parent only waits, then ends as the child ended (its exit status, or its signal); the
    /// child is killed if the parent ends first. Returns false, in this process, when there is no child
    /// (fork failed, as a same-user process can make it fail by lowering this process's RLIMIT_NPROC):
    /// the caller must then stop rather than read secrets here.
    ///
    /// Why: the kernel checks who may read `/proc/<pid>/mem` when it is opened. A process of the same
    /// user that opened it in the moments between exec and `protectProcess` keeps reading this address
    /// space afterwards. The child's address space is a copy made after `protectProcess`: no descriptor
    /// on it was ever opened, and none can be now.
    public static func continueInProtectedChild() -> Bool {
        let parent = getpid()
        let child = fork()
        if child < 0 { return false }
        if child == 0 {
            _ = process_control_die_with_parent()
            if getppid() != parent { _exit(1) }  // the parent ended before the request took effect
            return true
        }
        // Interrupts from the terminal reach the child too; the parent ends the way the child did.
        _ = signal(SIGINT, SIG_IGN)
        _ = signal(SIGQUIT, SIG_IGN)
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 {
            if errno != EINTR { _exit(1) }
        }
        let signalNumber = status & 0x7f
        // `_exit`, not `exit`: the parent has nothing of its own to flush or tear down, and anything the
        // two share was the child's to finish (output written before the fork would come out twice);
        // each page it wrote on the way out would also be one more copy-on-write fault.
        if signalNumber == 0 { _exit((status >> 8) & 0xff) }
        _ = signal(signalNumber, SIG_DFL)
        _ = raise(signalNumber)
        _exit(128 + signalNumber)
    }
}
