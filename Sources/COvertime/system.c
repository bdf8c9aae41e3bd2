#define _GNU_SOURCE
#include "overtime_system.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

_Static_assert(sizeof(struct overtime_peer) == sizeof(struct ucred), "overtime_peer is struct ucred");

int overtime_peer_credentials(int fd, struct overtime_peer *peer) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    peer->pid = credentials.pid;
    peer->uid = credentials.uid;
    peer->gid = credentials.gid;
    return 0;
}

int overtime_accept_cloexec_nonblock(int fd) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

int overtime_become_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

int overtime_peek_exited_child(void) {
    siginfo_t info;
    info.si_pid = 0;
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return -1;
    return info.si_pid;
}

int overtime_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int overtime_status_exited(int status) { return WIFEXITED(status); }
int overtime_status_exit_code(int status) { return WEXITSTATUS(status); }
int overtime_status_signaled(int status) { return WIFSIGNALED(status); }
int overtime_status_signal(int status) { return WTERMSIG(status); }
