#ifndef OVERTIME_CLIBUV_SHIM_H
#define OVERTIME_CLIBUV_SHIM_H
// libuv, as Debian's libuv1-dev (1.44) ships it, and two Linux calls that glibc only
// declares under _GNU_SOURCE. Only OvertimeLoop imports this module.
#include <uv.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <unistd.h>

// glibc extensions to posix_spawn that <spawn.h> declares only under _GNU_SOURCE (all in
// glibc >= 2.34; Debian 12 has 2.36). Declared again here, as glibc declares them.
#define OVERTIME_POSIX_SPAWN_SETSID 0x80
extern int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *__restrict actions,
                                                const char *__restrict path);
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

// pipe2(fds, O_CLOEXEC): both ends close-on-exec from birth.
static inline int overtime_pipe_cloexec(int fds[2]) {
    return (int)syscall(SYS_pipe2, fds, O_CLOEXEC);
}
#endif
