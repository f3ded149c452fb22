// prctl is variadic, which Swift cannot call: these fix its arguments.
#include <signal.h>
#include <sys/prctl.h>

/// Makes the process non-dumpable: no core file, and other processes of the same user can no longer
/// attach to it or read its memory through /proc. Returns 0 on success.
static inline int process_control_forbid_dumps(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/// Makes the process dumpable again (tests put a process back as it started). Returns 0 on success.
static inline int process_control_allow_dumps(void) {
    return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

/// Whether the process is dumpable now: 1 yes, 0 no, -1 when the kernel does not say.
static inline int process_control_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
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

#include <poll.h>

/// 0 when the process the pidfd refers to has not ended. A pidfd turns readable when its process
/// ends; polling it needs no right over the process (a signal, even 0, would need CAP_KILL for a
/// process of another user), and it also counts a process that ended but was not yet reaped as ended.
static inline int process_control_pidfd_alive(int pidfd) {
    struct pollfd wait = { pidfd, POLLIN, 0 };
    int ready = poll(&wait, 1, 0);
    if (ready < 0) return -1;
    return ready == 0 ? 0 : -1;
}

#include <sys/uio.h>

/// Copies `length` bytes at `address` in process `pid` into `buffer` (process_vm_readv: needs the right
/// to attach to that process, which CAP_SYS_PTRACE gives). Returns the bytes copied, or -1.
static inline long process_control_read_memory(int pid, void *buffer, unsigned long address, unsigned long length) {
    struct iovec local = { buffer, length };
    struct iovec remote = { (void *)address, length };
    return (long)syscall(SYS_process_vm_readv, pid, &local, 1UL, &remote, 1UL, 0UL);
}

/// accept4 with close-on-exec (a GNU extension the Swift Glibc module leaves out).
int accept4(int, struct sockaddr *, socklen_t *, int);
static inline int process_control_accept(int socket) {
    return accept4(socket, (struct sockaddr *)0, (socklen_t *)0, SOCK_CLOEXEC);
}

#include <sys/vfs.h>

/// The filesystem type (statfs's f_type) of the filesystem holding `path`, or 0.
static inline long process_control_filesystem_type(const char *path) {
    struct statfs info;
    return statfs(path, &info) == 0 ? (long)info.f_type : 0;
}

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <string.h>
#include <sys/stat.h>

/// The inode of the socket at the other end of the connected Unix socket `fd` (the client's end, as
/// its owner's /proc/<pid>/fd shows it: "socket:[inode]"), asked of the kernel's sock_diag; -1 when it
/// cannot be told.
static inline long process_control_unix_peer_inode(int fd) {
    struct stat own;
    if (fstat(fd, &own) != 0) return -1;
    int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (diag < 0) return -1;
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = ~0U;
    message.request.udiag_ino = (unsigned)own.st_ino;
    message.request.udiag_show = UDIAG_SHOW_PEER;
    message.request.udiag_cookie[0] = ~0U;
    message.request.udiag_cookie[1] = ~0U;
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    if (sendto(diag, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        close(diag);
        return -1;
    }
    long buffer[1024];
    ssize_t received = recv(diag, buffer, sizeof buffer, 0);
    close(diag);
    if (received <= 0) return -1;
    int length = (int)received;
    struct nlmsghdr *header = (struct nlmsghdr *)buffer;
    if (!NLMSG_OK(header, length) || header->nlmsg_type != SOCK_DIAG_BY_FAMILY) return -1;
    struct unix_diag_msg *reply = (struct unix_diag_msg *)NLMSG_DATA(header);
    if (reply->udiag_ino != (unsigned)own.st_ino) return -1;
    struct rtattr *attribute = (struct rtattr *)(reply + 1);
    int remaining = (int)header->nlmsg_len - (int)NLMSG_LENGTH(sizeof *reply);
    while (RTA_OK(attribute, remaining)) {
        if (attribute->rta_type == UNIX_DIAG_PEER) return (long)*(unsigned *)RTA_DATA(attribute);
        attribute = RTA_NEXT(attribute, remaining);
    }
    return -1;
}

#ifndef MSG_CMSG_CLOEXEC
#define MSG_CMSG_CLOEXEC 0x40000000
#endif

// Descriptors passed over a Unix socket (SCM_RIGHTS): how a client hands the daemon a file it opened
// itself, so that the daemon never opens a path on its behalf. CMSG_* are macros, which Swift cannot use.

/// Sends `length` bytes at `buffer` on `socket`, with the descriptor `fd` beside them. Returns the bytes
/// sent, or -1.
static inline long process_control_send_descriptor(int socket, const void *buffer, unsigned long length, int fd,
                                                   int flags) {
    struct iovec data = { (void *)buffer, length };
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int))]; } control;
    memset(&control, 0, sizeof control);
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof(int));
    return (long)sendmsg(socket, &message, flags);
}

/// Receives up to `length` bytes into `buffer` from `socket`. The descriptors that came beside them
/// (close-on-exec) are put in `fds`, at most `capacity`, their number in `*count`; room is made for the
/// kernel's most in one message (253), so that it drops none itself (it would release them on this
/// thread). Returns the bytes received (0 at the end of the stream), or -1.
static inline long process_control_receive(int socket, void *buffer, unsigned long length, int flags, int *fds,
                                           int capacity, int *count) {
    *count = 0;
    struct iovec data = { buffer, length };
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int) * 253)]; } control;
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    long received = (long)recvmsg(socket, &message, flags | MSG_CMSG_CLOEXEC);
    if (received < 0) return -1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        int inMessage = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int index = 0; index < inMessage; index++) {
            int passed;
            memcpy(&passed, CMSG_DATA(header) + index * sizeof(int), sizeof(int));
            if (*count < capacity) {
                fds[(*count)++] = passed;
            } else {
                close(passed);
            }
        }
    }
    return received;
}
