#ifndef OVERTIME_SPAWN_H
#define OVERTIME_SPAWN_H
// A task's process from the outside in: starting it, with everything that must happen in
// the child between fork and exec that neither posix_spawn nor libuv's uv_spawn can do (a
// parent-death signal, dropping privileges, resource limits, a nice value); the group guard
// that kills its group if the supervisor dies; the pseudo-terminal its output may go
// through. In C because the first two run as a vfork child or a fork of a multi-threaded
// supervisor, where only plain system calls are safe. Only OvertimeLoop imports it.
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

// Every pointer here is non-null unless marked _Nullable (for Swift: non-optional).
#pragma clang assume_nonnull begin

/// Which step of starting the child failed.
enum overtime_spawn_step {
    OVERTIME_SPAWN_OK = 0,
    OVERTIME_SPAWN_FORK,              // vfork itself (out of processes or memory)
    OVERTIME_SPAWN_CGROUP,            // entering the task's cgroup (detail: which one)
    OVERTIME_SPAWN_SESSION,           // setsid
    OVERTIME_SPAWN_DESCRIPTORS,       // moving descriptors into place
    OVERTIME_SPAWN_LIMIT,             // a resource limit (detail: which one)
    OVERTIME_SPAWN_PRIORITY,          // the nice value
    OVERTIME_SPAWN_GROUPS,            // clearing the supplementary groups
    OVERTIME_SPAWN_GROUP,             // switching group
    OVERTIME_SPAWN_USER,              // switching user
    OVERTIME_SPAWN_DIRECTORY,         // chdir to the working directory
    OVERTIME_SPAWN_PARENT_DEATH,      // arming the parent-death signal, or the parent had died
    OVERTIME_SPAWN_EXEC,              // execve (or the command was not found on the path)
};

/// The resource limits a task may be given (mapped to RLIMIT_* in spawn.c, where
/// glibc's names are all visible).
enum overtime_spawn_resource {
    OVERTIME_LIMIT_ADDRESS_SPACE = 0,  // RLIMIT_AS
    OVERTIME_LIMIT_OPEN_FILES,         // RLIMIT_NOFILE
    OVERTIME_LIMIT_CPU_SECONDS,        // RLIMIT_CPU
    OVERTIME_LIMIT_PROCESSES,          // RLIMIT_NPROC
};

/// A resource limit to set in the child; ~0ULL is unlimited.
struct overtime_spawn_limit {
    int resource;   // enum overtime_spawn_resource
    unsigned long long soft;
    unsigned long long hard;
};

struct overtime_spawn_request {
    /// The command: run as is when it contains a slash, else looked up on `search_path`.
    const char *file;
    char *_Nullable const *_Nonnull argv;   // NULL-terminated
    char *_Nullable const *_Nonnull envp;   // NULL-terminated
    /// Colon-separated directories for a command without a slash (an empty entry is ".").
    const char *search_path;
    /// Scratch space for "directory/file", at least strlen of the longest search entry +
    /// strlen(file) + 2 bytes (the child cannot allocate).
    char *path_buffer;
    size_t path_buffer_size;
    /// NULL to stay in the supervisor's directory.
    const char *_Nullable working_directory;
    /// The child's descriptors by position: descriptors[i] becomes fd i (-1: left closed);
    /// all else is closed.
    const int *_Nullable descriptors;   // NULL when descriptor_count is 0
    int descriptor_count;
    const struct overtime_spawn_limit *_Nullable limits;   // NULL when limit_count is 0
    int limit_count;
    int set_priority;       // nonzero: setpriority to `priority`
    int priority;
    int set_group;          // nonzero: supplementary groups cleared, gid set to `gid`
    unsigned int gid;
    int set_user;           // nonzero: uid set to `uid` (after the group)
    unsigned int uid;
    /// The signal the child gets when the supervisor's spawning thread dies; 0 for none.
    int parent_death_signal;
    /// The group guard's channel (see overtime_start_group_guard), or -1: the child lists
    /// its own group there first thing, so that nothing it starts can be missed.
    int guard_channel;
    /// The `cgroup.procs` files (open for writing) of the cgroups the child moves itself
    /// into before anything else, so that nothing it will ever start is outside them; -1
    /// for none (a v2 cgroup, a v1 memory cgroup).
    int cgroup_procs[2];
    /// The v2 cgroup's directory (open, O_DIRECTORY), or -1: where the kernel allows it the
    /// child is created inside it (clone3's CLONE_INTO_CGROUP) and does not write
    /// `cgroup_procs[0]`, which must then be that cgroup's. A move into a cgroup waits for
    /// the kernel's cgroup lock and, when no move happened in the last few milliseconds,
    /// for an RCU grace period (milliseconds: docs/benchmarks.md, "A cgroup per task");
    /// being born inside costs neither.
    int cgroup_directory;
};

struct overtime_spawn_failure {
    int step;     // enum overtime_spawn_step
    int error;    // errno
    int detail;   // for OVERTIME_SPAWN_LIMIT: the index into `limits`
    int listed;   // set on success too: the child listed its group with the guard itself
    int pid;      // the child's pid, also when it failed (and was reaped): to unlist it
};

/// Starts the child in a session of its own with every signal at its default, an empty
/// mask, only the given descriptors open, and the requested limits, priority, credentials,
/// directory and parent-death signal, then execs it. Returns its pid, or -1 with `failure`
/// filled in (the failed child has been reaped). Call it from the thread that should count
/// as the child's parent for the parent-death signal.
pid_t overtime_spawn(const struct overtime_spawn_request *request, struct overtime_spawn_failure *failure);

/// Starts the group guard: a small process, forked from the supervisor, that outlives it
/// only to kill the process groups of the tasks it still had. Each task's group id is
/// written to `*channel` (close-on-exec) as a native int32 when the task starts (by its
/// child, see `guard_channel`, or by the supervisor), and its negation once the group is
/// gone, one record per message of a sequenced-packet socket. When the channel reaches end of file (the supervisor exited, or was killed, even
/// by SIGKILL) the guard sends SIGKILL to every group still listed and exits. It runs in a
/// session of its own, with every catchable signal ignored and no other descriptor open,
/// so neither a terminal's Ctrl-C nor a signal to the supervisor's group stops it early.
/// Before it exits it also empties each of `cgroup_trees` (the run's own cgroup
/// directories, `count` of them, copied by the fork): `cgroup.kill` where the kernel has it,
/// else SIGKILL to every pid in the `cgroup.procs` of each directory below, until they are
/// empty; then it removes the directories below and the tree itself.
/// Returns once the guard is set up: the guard's pid, or -1 with errno set.
///
/// With `as_own_program` (Overtime's own CLI, a static binary) the guard is the program run
/// again from `/proc/self/exe` instead of a fork, and is not waited for: it sets itself up
/// with every signal blocked until ignored. Where the exec fails it is forked as above.
/// At most two trees then.
pid_t overtime_start_group_guard(int *channel, const char *_Nullable const *_Nullable cgroup_trees, int count,
                                 int as_own_program);

/// Opens a pseudo-terminal for a task's output: the task gets `*terminal` (its side, so it
/// sees a terminal: line-buffered output, colours, a window size), the supervisor reads
/// `*reader`. Output processing is off, so bytes arrive as written (no "\n" → "\r\n"), and
/// the window size is copied from `size_from` when that is a terminal (-1: none). Both
/// descriptors are close-on-exec; neither becomes anyone's controlling terminal.
/// Returns 0, or -1 with errno set.
int overtime_open_output_terminal(int size_from, int *reader, int *terminal);

/// Copies the window size of terminal `from` to the pseudo-terminal read at `reader`
/// (after the real terminal was resized). Returns 0, or -1 with errno set.
int overtime_copy_window_size(int from, int reader);

/// Reaps the child `pid` once it exits, waiting at most `timeout_ms` (on a pidfd, so it
/// returns the moment the child is gone). Returns 1 when reaped, 0 when it still runs.
int overtime_reap_within(pid_t pid, int timeout_ms);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif
#endif
