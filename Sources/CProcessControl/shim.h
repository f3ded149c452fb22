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

// Peer identity for the daemon: the kernel's record of who connected, and a handle on that process
// that cannot be confused with a later process given the same pid.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/// The credentials the kernel recorded when the peer connected. Returns 0 on success.
static inline int process_control_peer_credentials(int socket, int *pid, unsigned *uid, unsigned *gid) {
    // struct ucred's layout (it is declared only under _GNU_SOURCE).
    struct { int pid; unsigned uid; unsigned gid; } credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

/// A pidfd for the process that connected (Linux 6.5 and later), or -1.
static inline int process_control_peer_pidfd(int socket) {
    int pidfd = -1;
    socklen_t length = sizeof pidfd;
    if (getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) != 0) return -1;
    return pidfd;
}

/// A pidfd for `pid` (Linux 5.3 and later), or -1.
static inline int process_control_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/// 0 when the process the pidfd refers to has not ended.
static inline int process_control_pidfd_alive(int pidfd) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, 0, (void *)0, 0);
}

/// accept4 with close-on-exec (a GNU extension the Swift Glibc module leaves out).
int accept4(int, struct sockaddr *, socklen_t *, int);
static inline int process_control_accept(int socket) {
    return accept4(socket, (struct sockaddr *)0, (socklen_t *)0, SOCK_CLOEXEC);
}
