#ifndef OVERTIME_CLIBUV_SHIM_H
#define OVERTIME_CLIBUV_SHIM_H
// libuv, as Debian's libuv1-dev (1.44) ships it, and two Linux calls that glibc only
// declares under _GNU_SOURCE. Only OvertimeLoop imports this module.
#include <uv.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

// Marks every descriptor from `first` up close-on-exec in one call (Linux >= 5.11).
// Returns -1 with errno (ENOSYS, EINVAL) on older kernels; the caller falls back.
static inline int overtime_mark_cloexec_from(unsigned int first) {
#ifdef SYS_close_range
    return (int)syscall(SYS_close_range, first, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
#else
    errno = ENOSYS;
    return -1;
#endif
}

// pipe2(fds, O_CLOEXEC): both ends close-on-exec from birth.
static inline int overtime_pipe_cloexec(int fds[2]) {
    return (int)syscall(SYS_pipe2, fds, O_CLOEXEC);
}
#endif
