#ifndef OVERTIME_SYSTEM_H
#define OVERTIME_SYSTEM_H
// The few Linux calls Swift cannot make as they are: ones glibc declares only under
// _GNU_SOURCE (which system.c defines, so nothing here respells a kernel structure), a
// variadic one, and the wait-status macros (a macro with arguments never reaches Swift).
// Only OvertimeLoop imports it.
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

/// The credentials of a Unix socket's peer (SO_PEERCRED), as struct ucred has them.
struct overtime_peer { int pid; unsigned int uid; unsigned int gid; };

/// Fills `peer` with the credentials of the process at the other end of socket `fd`.
/// Returns 0, or -1 with errno set.
int overtime_peer_credentials(int fd, struct overtime_peer *peer);

/// accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK): the new connection's
/// descriptor, or -1 with errno set.
int overtime_accept_cloexec_nonblock(int fd);

/// Makes the calling process a child subreaper: orphaned descendants are reparented to it
/// instead of to init (prctl is variadic). Returns 0, or -1 with errno set.
int overtime_become_subreaper(void);

/// The pid of some child that has exited, without reaping it (waitid WNOWAIT); 0 when none,
/// -1 when there are no children at all.
int overtime_peek_exited_child(void);

/// pipe2(fds, O_CLOEXEC): both ends close-on-exec from birth; fds[0] reads, fds[1] writes.
/// Returns 0, or -1 with errno set.
int overtime_pipe_cloexec(int fds[_Nonnull 2]);

/// getrandom(buffer, length, 0): bytes from the kernel's random pool (glibc declares it in
/// <sys/random.h>, which Swift's Glibc module leaves out). Returns how many bytes were
/// filled, or -1 with errno set.
long overtime_random_bytes(void *buffer, unsigned long length);

/// The wait-status macros of <sys/wait.h>, for a status waitpid filled in.
/// Nonzero when the child exited by itself (WIFEXITED).
int overtime_status_exited(int status);
/// Its exit code, 0 to 255 (WEXITSTATUS; only when it exited).
int overtime_status_exit_code(int status);
/// Nonzero when a signal ended it (WIFSIGNALED).
int overtime_status_signaled(int status);
/// The signal that ended it (WTERMSIG; only when signaled).
int overtime_status_signal(int status);

/// One datagram from a Unix datagram socket with SO_PASSCRED set (recvmsg, MSG_DONTWAIT,
/// MSG_CMSG_CLOEXEC): up to `capacity` bytes into `buffer`, the sender's credentials into
/// `sender` (pid 0 when the kernel gave none), and the descriptors it carried into `fds`
/// (at most `max_fds`; any beyond are closed here), their number in `fd_count`. Returns the
/// datagram's length (a longer one is cut, and its length reported as `capacity + 1`), or
/// -1 with errno set (EAGAIN: none waiting).
long overtime_receive_datagram(int fd, void *buffer, unsigned long capacity, struct overtime_peer *sender,
                               int *fds, int max_fds, int *fd_count);

/// socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK) with SO_PASSCRED on, so that
/// every datagram carries its sender's credentials. Returns the descriptor, or -1.
int overtime_datagram_socket_with_credentials(void);

/// statfs(path)'s f_type (the filesystem's magic number), or -1 with errno set
/// (<sys/vfs.h> is not in Swift's Glibc module).
long overtime_filesystem_type(const char *path);

/// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) (<sys/eventfd.h> is not in Swift's Glibc module):
/// the descriptor, or -1 with errno set.
int overtime_eventfd(void);

/// Whether the program was started by a program interpreter (the dynamic loader): 0 for a
/// statically linked one (getauxval's AT_BASE; <sys/auxv.h> is not in Swift's Glibc module).
int overtime_has_program_interpreter(void);

/// One malloc arena for the whole process (glibc's M_ARENA_MAX, a macro Swift does not
/// import); 0 where the C library has no such setting.
int overtime_use_one_malloc_arena(void);

/// Unmaps from this process the pages of its own program file that were never writable (its
/// code and read-only data), so that they stop counting in its resident memory; the next
/// touch of one maps it again from the page cache (a minor fault). Those pages were never
/// written, so no content is lost (MADV_DONTNEED on a private mapping drops only copies
/// made by writes). 0, or -errno.
int overtime_unmap_program_read_only_pages(void);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif
#endif
