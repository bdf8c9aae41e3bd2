#ifndef OVERTIME_CLIBUV_SHIM_H
#define OVERTIME_CLIBUV_SHIM_H
// libuv, as Debian's libuv1-dev (1.44) ships it, and a few Linux calls that glibc only
// declares under _GNU_SOURCE or that Swift cannot call (variadic). Only OvertimeLoop
// imports this module.
#include <uv.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

// The credentials of a Unix socket's peer (SO_PEERCRED). struct ucred is declared only
// under _GNU_SOURCE, so the same layout is spelled here.
struct overtime_peer { int pid; unsigned int uid; unsigned int gid; };
static inline int overtime_peer_credentials(int fd, struct overtime_peer *peer) {
    socklen_t length = sizeof *peer;
    return getsockopt(fd, SOL_SOCKET, 17 /* SO_PEERCRED */, peer, &length);
}

// accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), declared only under _GNU_SOURCE.
static inline int overtime_accept_cloexec_nonblock(int fd) {
    return (int)syscall(SYS_accept4, fd, (void *)0, (void *)0, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

// Makes the calling process a child subreaper: orphaned descendants are reparented to it
// instead of to init (prctl is variadic, which Swift cannot call).
static inline int overtime_become_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

// The pid of some child that has exited, without reaping it (waitid WNOWAIT); 0 when none,
// -1 when there are no children at all.
static inline int overtime_peek_exited_child(void) {
    siginfo_t info;
    info.si_pid = 0;
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return -1;
    return info.si_pid;
}

// pipe2(fds, O_CLOEXEC): both ends close-on-exec from birth.
static inline int overtime_pipe_cloexec(int fds[2]) {
    return (int)syscall(SYS_pipe2, fds, O_CLOEXEC);
}
#endif
