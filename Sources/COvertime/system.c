#define _GNU_SOURCE
#include <sys/random.h>
#include "overtime_system.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/vfs.h>
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

long overtime_random_bytes(void *buffer, unsigned long length) {
    return getrandom(buffer, length, 0);
}

int overtime_status_exited(int status) { return WIFEXITED(status); }
int overtime_status_exit_code(int status) { return WEXITSTATUS(status); }
int overtime_status_signaled(int status) { return WIFSIGNALED(status); }
int overtime_status_signal(int status) { return WTERMSIG(status); }

long overtime_receive_datagram(int fd, void *buffer, unsigned long capacity, struct overtime_peer *sender,
                               int *fds, int max_fds, int *fd_count) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 16)];
    } control;
    struct iovec part = { .iov_base = buffer, .iov_len = capacity };
    struct msghdr message = {
        .msg_iov = &part, .msg_iovlen = 1, .msg_control = control.bytes, .msg_controllen = sizeof control.bytes,
    };
    sender->pid = 0;
    sender->uid = (unsigned int)-1;
    sender->gid = (unsigned int)-1;
    *fd_count = 0;
    ssize_t length = recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (length < 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c != NULL; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(c), sizeof credentials);
            sender->pid = credentials.pid;
            sender->uid = credentials.uid;
            sender->gid = credentials.gid;
        } else if (c->cmsg_type == SCM_RIGHTS) {
            int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < count; i++) {
                int received;
                memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
                if (*fd_count < max_fds) fds[(*fd_count)++] = received;
                else close(received);
            }
        }
    }
    if (message.msg_flags & MSG_TRUNC) return (long)capacity + 1;
    return (long)length;
}

int overtime_datagram_socket_with_credentials(void) {
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int overtime_eventfd(void) {
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

long overtime_filesystem_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long)info.f_type;
}

int overtime_use_one_malloc_arena(void) {
#ifdef __GLIBC__
    return mallopt(M_ARENA_MAX, 1);
#else
    return 0;
#endif
}

int overtime_has_program_interpreter(void) {
    return getauxval(AT_BASE) != 0;
}

static int unmap_read_only_segments(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    int *error = context;
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
        // A segment loaded writable may hold pages the program wrote (its data, and the
        // relocated part made read-only after start, RELRO): dropping those would lose
        // what was written. Only segments never writable are safe to drop.
        if (segment->p_type != PT_LOAD || (segment->p_flags & PF_W)) continue;
        uintptr_t start = info->dlpi_addr + segment->p_vaddr;
        uintptr_t end = start + segment->p_memsz;
        start &= ~(uintptr_t)(page - 1);
        end = (end + page - 1) & ~(uintptr_t)(page - 1);
        if (madvise((void *)start, end - start, MADV_DONTNEED) != 0) {
            *error = errno;
            return 1;
        }
    }
    // The first object is the program itself; shared libraries (a dynamic build's) are
    // left as they are: one with text relocations would have written its code.
    return 1;
}

int overtime_unmap_program_read_only_pages(void) {
    int error = 0;
    dl_iterate_phdr(unmap_read_only_segments, &error);
    return -error;
}
