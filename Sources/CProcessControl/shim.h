// prctl is variadic, which Swift cannot call: these fix its arguments.
#include <signal.h>
#include <sys/prctl.h>

/// Makes the process non-dumpable: no core file, and other processes of the same user can no longer
/// attach to it or read its memory through /proc. Returns 0 on success.
static inline int process_control_forbid_dumps(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/// Asks the kernel to kill this process when its parent ends. Returns 0 on success.
static inline int process_control_die_with_parent(void) {
    return prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
}
