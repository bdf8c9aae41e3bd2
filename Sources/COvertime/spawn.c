#define _GNU_SOURCE
#include "overtime_spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// Why vfork, and why raw system calls.
//
// The supervisor is multi-threaded; fork would copy its page tables only for exec to throw
// them away (spawn throughput halved with libuv's fork-based uv_spawn, docs/benchmarks.md).
// vfork runs the child on the parent's memory and suspends only the calling thread until
// the child execs or exits, as glibc's posix_spawn does internally. On that shared memory
// the child may not allocate, take a lock, or call anything that believes it is the
// multi-threaded parent: glibc's setuid, for one, signals every thread of "its" process to
// change their credentials too. So the child makes system calls directly, writes nothing
// but its own stack, errno (the spawning thread's, which the caller does not read after a
// successful spawn) and the failure record its parent reads, and leaves by exec or _exit.
//
// Signals: all are blocked in the parent thread before vfork (all glibc lets a program
// block: not its two internal ones, 32 and 33, which nothing sends to the child), so no
// handler of the supervisor's can run on the child's side. The child then puts every
// disposition back to its default (the ignored ones too: a task must not inherit an
// ignored SIGINT or SIGPIPE), and only just before exec empties its mask.

static long child_call(long number, long a, long b, long c, long d) {
    return syscall(number, a, b, c, d);
}

static void close_from(int first);   // below, with the guard's system calls it shares

// Every library function the vfork child calls (syscall, errno's __errno_location, memcpy,
// strchr, strlen), bound once in the parent: a first call from the child would otherwise
// resolve the symbol there (lazy binding), in the dynamic linker, on memory it shares with
// the supervisor. Sizes and contents the compiler cannot see keep these real calls.
static void bind_child_functions(void) {
    static int bound;
    if (bound) return;
    char copy[2];
    volatile size_t size = 2;
    memcpy(copy, "a", size);
    int saved = errno;
    errno = saved;
    bound = strchr(copy, 'a') != NULL && strlen(copy) == 1 && syscall(SYS_getpid) > 0;
}

__attribute__((noreturn)) static void child_fail(volatile struct overtime_spawn_failure *failure,
                                                 int step, int error, int detail) {
    failure->step = step;
    failure->error = error;
    failure->detail = detail;
    syscall(SYS_exit_group, 127);   // not _exit: nothing the parent has not already bound
    __builtin_unreachable();
}

// Every signal to its default disposition. The kernel's sigaction with a zeroed structure
// is SIG_DFL with no flags whatever the architecture's layout; glibc's own sigaction would
// refuse its two internal signals (32 and 33), which must be reset as well.
static void reset_signal_dispositions(void) {
    unsigned long zeroed[8] = {0};
    for (int signal = 1; signal <= 64; signal++) {
        if (signal == SIGKILL || signal == SIGSTOP) continue;
        child_call(SYS_rt_sigaction, signal, (long)zeroed, 0, 8);
    }
}

static int rlimit_resource(int resource) {
    switch (resource) {
    case OVERTIME_LIMIT_ADDRESS_SPACE: return RLIMIT_AS;
    case OVERTIME_LIMIT_OPEN_FILES: return RLIMIT_NOFILE;
    case OVERTIME_LIMIT_CPU_SECONDS: return RLIMIT_CPU;
    case OVERTIME_LIMIT_PROCESSES: return RLIMIT_NPROC;
    default: return -1;
    }
}

// descriptors[i] → fd i, every other descriptor closed; a slot given -1 is left closed (a
// gap below a higher one, such as a notification fd). A source below the slot count that
// is not already in its own slot could be overwritten by an earlier slot's dup2, so it is
// first copied above every slot.
static int place_descriptors(const int *descriptors, int count) {
    int sources[16];
    if (count > 16) return EINVAL;
    for (int slot = 0; slot < count; slot++) {
        int source = descriptors[slot];
        if (source >= 0 && source < count && source != slot) {
            long copy = child_call(SYS_fcntl, source, F_DUPFD_CLOEXEC, count, 0);
            if (copy < 0) return errno;
            source = (int)copy;
        }
        sources[slot] = source;
    }
    for (int slot = 0; slot < count; slot++) {
        if (sources[slot] < 0) {
            child_call(SYS_close, slot, 0, 0, 0);  // EBADF when it was not open: as wanted
        } else if (sources[slot] == slot) {
            // Already in place: dup2 onto itself would keep close-on-exec, so clear it.
            if (child_call(SYS_fcntl, slot, F_SETFD, 0, 0) < 0) return errno;
        } else if (child_call(SYS_dup3, sources[slot], slot, 0, 0) < 0) {
            return errno;
        }
    }
    close_from(count);
    return 0;
}

// execve on each directory of the search path in turn, as execvp does, without allocating.
// Returns the errno to report: EACCES if some candidate existed but could not be run,
// else the last "not here" error.
static int exec_on_path(const struct overtime_spawn_request *request) {
    const char *file = request->file;
    if (strchr(file, '/') != NULL) {
        child_call(SYS_execve, (long)file, (long)request->argv, (long)request->envp, 0);
        return errno;
    }
    size_t file_length = strlen(file);
    int denied = 0;
    int last = ENOENT;
    const char *entry = request->search_path;
    while (1) {
        const char *end = strchr(entry, ':');
        size_t length = end ? (size_t)(end - entry) : strlen(entry);
        const char *directory = length ? entry : ".";
        size_t directory_length = length ? length : 1;
        if (directory_length + 1 + file_length + 1 <= request->path_buffer_size) {
            char *path = request->path_buffer;
            memcpy(path, directory, directory_length);
            path[directory_length] = '/';
            memcpy(path + directory_length + 1, file, file_length + 1);
            child_call(SYS_execve, (long)path, (long)request->argv, (long)request->envp, 0);
            switch (errno) {
            case EACCES: denied = 1; break;
            case ENOENT: case ENOTDIR: case ESTALE: case ENODEV: case ETIMEDOUT: case ENAMETOOLONG:
                last = errno;
                break;
            default:
                return errno;   // found but not runnable (ENOEXEC, E2BIG, ETXTBSY, …)
            }
        }
        if (!end) break;
        entry = end + 1;
    }
    return denied ? EACCES : last;
}

// Decimal digits of `value` into `buffer` (at least 12 bytes); returns their count.
static int format_decimal(long value, char *buffer) {
    char reversed[12];
    int count = 0;
    do { reversed[count++] = (char)('0' + value % 10); value /= 10; } while (value > 0 && count < 12);
    for (int i = 0; i < count; i++) buffer[i] = reversed[count - 1 - i];
    return count;
}

__attribute__((noreturn, noinline)) static void run_child(const struct overtime_spawn_request *request,
                                                          pid_t parent,
                                                          volatile struct overtime_spawn_failure *failure,
                                                          int born_in_cgroup) {
    // Into the task's cgroups first: from here on, everything the task starts is counted
    // and killed with it, however it detaches (setsid, a double fork).
    for (int i = 0; i < 2; i++) {
        if (request->cgroup_procs[i] < 0 || (i == 0 && born_in_cgroup)) continue;
        char digits[12];
        int length = format_decimal(child_call(SYS_getpid, 0, 0, 0, 0), digits);
        if (child_call(SYS_write, request->cgroup_procs[i], (long)digits, length, 0) != length)
            child_fail(failure, OVERTIME_SPAWN_CGROUP, errno, i);
    }
    if (child_call(SYS_setsid, 0, 0, 0, 0) < 0) child_fail(failure, OVERTIME_SPAWN_SESSION, errno, 0);
    // Listed with the guard before anything of the task can run: a supervisor killed the
    // moment after exec, before its own thread got to it, would otherwise miss what the
    // task had started. Never waits: if the guard cannot take it now, the parent lists it.
    if (request->guard_channel >= 0) {
        int record = (int)child_call(SYS_getpid, 0, 0, 0, 0);
        long sent = syscall(SYS_sendto, request->guard_channel, &record, sizeof record, MSG_DONTWAIT | MSG_NOSIGNAL, 0, 0);
        failure->listed = sent == (long)sizeof record;
    }
    reset_signal_dispositions();
    int problem = place_descriptors(request->descriptors, request->descriptor_count);
    if (problem) child_fail(failure, OVERTIME_SPAWN_DESCRIPTORS, problem, 0);

    // Limits and priority first: raising a hard limit or lowering the nice value may need
    // the privileges about to be dropped.
    for (int i = 0; i < request->limit_count; i++) {
        struct rlimit limit = {(rlim_t)request->limits[i].soft, (rlim_t)request->limits[i].hard};
        if (child_call(SYS_prlimit64, 0, rlimit_resource(request->limits[i].resource), (long)&limit, 0) < 0)
            child_fail(failure, OVERTIME_SPAWN_LIMIT, errno, i);
    }
    if (request->set_priority &&
        child_call(SYS_setpriority, PRIO_PROCESS, 0, request->priority, 0) < 0)
        child_fail(failure, OVERTIME_SPAWN_PRIORITY, errno, 0);

    // Group before user (a dropped user could no longer change group). Every step is
    // checked: a failed drop ends the spawn, it never runs the task with what was left.
    // (uid_t)-1 would mean "leave it as it is" to setresuid and setresgid: never a target.
    if (request->set_group && request->gid == (unsigned int)-1) child_fail(failure, OVERTIME_SPAWN_GROUP, EINVAL, 0);
    if (request->set_user && request->uid == (unsigned int)-1) child_fail(failure, OVERTIME_SPAWN_USER, EINVAL, 0);
    if (request->set_group) {
        if (child_call(SYS_setgroups, 0, 0, 0, 0) < 0) child_fail(failure, OVERTIME_SPAWN_GROUPS, errno, 0);
        if (child_call(SYS_setresgid, request->gid, request->gid, request->gid, 0) < 0)
            child_fail(failure, OVERTIME_SPAWN_GROUP, errno, 0);
    }
    if (request->set_user &&
        child_call(SYS_setresuid, request->uid, request->uid, request->uid, 0) < 0)
        child_fail(failure, OVERTIME_SPAWN_USER, errno, 0);

    // The directory as the task's own user, so its permissions are the ones that apply.
    if (request->working_directory &&
        child_call(SYS_chdir, (long)request->working_directory, 0, 0, 0) < 0)
        child_fail(failure, OVERTIME_SPAWN_DIRECTORY, errno, 0);

    // Armed after the credentials change, which clears it. If the supervisor died before
    // this point the signal will never come, so check the parent is still ours.
    if (request->parent_death_signal) {
        if (child_call(SYS_prctl, PR_SET_PDEATHSIG, request->parent_death_signal, 0, 0) < 0)
            child_fail(failure, OVERTIME_SPAWN_PARENT_DEATH, errno, 0);
        if (child_call(SYS_getppid, 0, 0, 0, 0) != parent)
            child_fail(failure, OVERTIME_SPAWN_PARENT_DEATH, ESRCH, 0);
    }

    unsigned long empty_mask = 0;
    child_call(SYS_rt_sigprocmask, SIG_SETMASK, (long)&empty_mask, 0, 8);
    child_fail(failure, OVERTIME_SPAWN_EXEC, exec_on_path(request), 0);
}

// Creating the child inside its v2 cgroup: clone3 with CLONE_INTO_CGROUP, as vfork
// (CLONE_VM | CLONE_VFORK: the parent thread waits until the child execs or exits).
//
// Unlike vfork, clone3 has no library wrapper that lets a child share the parent's stack,
// so the child gets a stack of its own (one per spawning thread, made on first use) and a
// few instructions start it there: the system call, then in the child a call to
// `clone_child_entry`, which never returns (it execs or exits). x86-64 only for now; other
// machines, kernels before 5.7, and sandboxes that refuse clone3 (Docker's default
// seccomp profile answers ENOSYS) take the vfork path, which moves the child in with a
// write to cgroup.procs.
struct clone_child_context {
    const struct overtime_spawn_request *request;
    pid_t parent;
    volatile struct overtime_spawn_failure *failure;
};

__attribute__((noreturn)) static void clone_child_entry(struct clone_child_context *context) {
    run_child(context->request, context->parent, context->failure, 1);
}

#if defined(__x86_64__) && defined(SYS_clone3)
#include <linux/sched.h>
#define OVERTIME_HAS_CLONE_INTO_CGROUP 1

enum { CHILD_STACK_SIZE = 256 * 1024 };

// The spawning thread's child stack, with a guard page below it; NULL until first needed.
static __thread char *child_stack;

static char *child_stack_top(void) {
    if (!child_stack) {
        char *mapped = mmap(NULL, CHILD_STACK_SIZE + 4096, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (mapped == MAP_FAILED) return NULL;
        mprotect(mapped, 4096, PROT_NONE);
        child_stack = mapped + 4096;
    }
    return child_stack;
}

// Returns the child's pid, or -1 with errno; the child runs `clone_child_entry(context)`.
static long clone_into_cgroup(int cgroup, struct clone_child_context *context) {
    char *stack = child_stack_top();
    if (!stack) return -1;
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.stack = (unsigned long)stack;
    args.stack_size = CHILD_STACK_SIZE;
    args.cgroup = (unsigned long)cgroup;
    long result;
    register void (*entry)(struct clone_child_context *) __asm__("r12") = clone_child_entry;
    register struct clone_child_context *argument __asm__("r13") = context;
    __asm__ volatile(
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        // The child, at the top of its own stack (16-byte aligned): the call below leaves it
        // as a function expects it. r12 and r13 came through the system call unchanged.
        "xor %%ebp, %%ebp\n\t"
        "mov %%r13, %%rdi\n\t"
        "call *%%r12\n\t"
        "hlt\n\t"
        "1:\n\t"
        : "=a"(result)
        : "a"((long)SYS_clone3), "D"(&args), "S"(sizeof args), "r"(entry), "r"(argument)
        : "rcx", "r11", "memory");
    if (result < 0) {
        errno = (int)-result;
        return -1;
    }
    return result;
}
#endif

pid_t overtime_spawn(const struct overtime_spawn_request *request, struct overtime_spawn_failure *failure) {
    volatile struct overtime_spawn_failure child_failure = {OVERTIME_SPAWN_OK, 0, 0, 0, 0};
    bind_child_functions();
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t parent = getpid();
    pid_t pid = -1;
#ifdef OVERTIME_HAS_CLONE_INTO_CGROUP
    // Once refused (an old kernel, a seccomp filter), never tried again in this process.
    static int clone_refused;
    if (request->cgroup_directory >= 0 && !__atomic_load_n(&clone_refused, __ATOMIC_RELAXED)) {
        struct clone_child_context context = {request, parent, &child_failure};
        pid = (pid_t)clone_into_cgroup(request->cgroup_directory, &context);
        if (pid < 0 && errno != EAGAIN && errno != ENOMEM) __atomic_store_n(&clone_refused, 1, __ATOMIC_RELAXED);
    }
#endif
    if (pid < 0) {
        pid = vfork();
        if (pid == 0) run_child(request, parent, &child_failure, 0);
    }
    int fork_error = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);

    failure->listed = child_failure.listed;
    failure->pid = pid > 0 ? pid : 0;
    if (pid < 0) {
        failure->step = OVERTIME_SPAWN_FORK;
        failure->error = fork_error;
        failure->detail = 0;
        return -1;
    }
    // The parent resumes only once the child has exec'd or exited, so the record is final.
    if (child_failure.step != OVERTIME_SPAWN_OK) {
        failure->step = child_failure.step;
        failure->error = child_failure.error;
        failure->detail = child_failure.detail;
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        return -1;
    }
    return pid;
}

// The group guard (see the header). Three ways it starts: forked from a program that embeds
// the library (a copy of a multi-threaded process), run again as Overtime's own static
// binary and caught at its first instruction (`overtime_entry`, before the C library has set
// itself up), or the same caught by a constructor where the binary has no such entry. So it
// depends on nothing of the C library: raw system calls, returning -errno rather than setting
// errno (which lives in thread-local storage, set up by the C library), no library function
// (glibc picks memcpy and strlen for the CPU at start, also not done yet), and no stack
// protector (its canary is thread-local too). Its own loops keep the compiler from making
// library calls of them (`no_builtin`).
#define GUARD_CODE __attribute__((no_builtin, no_stack_protector))

#if defined(__x86_64__)
GUARD_CODE static long guard_syscall(long number, long a, long b, long c, long d, long e, long f) {
    long result;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
}
#else
// Elsewhere the guard starts only after the C library (forked, or in the constructor), so
// its syscall() serves.
static long guard_syscall(long number, long a, long b, long c, long d, long e, long f) {
    long result = syscall(number, a, b, c, d, e, f);
    return result == -1 ? -errno : result;
}
#endif

GUARD_CODE static long guard_call(long number, long a, long b, long c, long d) {
    return guard_syscall(number, a, b, c, d, 0, 0);
}

GUARD_CODE __attribute__((noreturn)) static void guard_exit(int status) {
    for (;;) guard_call(SYS_exit_group, status, 0, 0, 0);
}

GUARD_CODE static size_t guard_length(const char *text) {
    size_t length = 0;
    while (text[length]) length++;
    return length;
}

GUARD_CODE static void guard_copy(void *to, const void *from, size_t count) {
    char *target = to;
    const char *source = from;
    for (size_t i = 0; i < count; i++) target[i] = source[i];   // forward: also moves down
}

// Closes every descriptor from `first` up: close_range, or on kernels before 5.9 (or under
// a seccomp filter that refuses it) one by one, as far as the descriptor limit allows. The
// spawning child's and the guard's, so in the guard's raw calls.
GUARD_CODE static void close_from(int first) {
    if (guard_call(SYS_close_range, first, ~0U, 0, 0) == 0) return;
    struct rlimit limit;
    long highest = 65536;
    if (guard_call(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&limit) == 0 && limit.rlim_cur < (rlim_t)highest)
        highest = (long)limit.rlim_cur;
    for (long fd = first; fd < highest; fd++) guard_call(SYS_close, fd, 0, 0, 0);
}

enum { GUARD_PID_LIMIT = 1 << 22 };   // PID_MAX_LIMIT on 64-bit Linux

// Names the guard `task-guard`, in its command name and its command line (which it shares
// with the supervisor after the fork): `pkill overtime`, `pidof overtime` or `pkill -f
// "overtime batch"` must hit the supervisor alone, so that the guard lives to clean up.
// The command line is rewritten in place, in the argument area /proc/self/stat locates.
GUARD_CODE static void retitle_guard(pid_t supervisor) {
    guard_call(SYS_prctl, PR_SET_NAME, (long)"task-guard", 0, 0);
    char stat[4096];
    long fd = guard_call(SYS_openat, AT_FDCWD, (long)"/proc/self/stat", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return;
    long n = guard_call(SYS_read, fd, (long)stat, sizeof stat - 1, 0);
    guard_call(SYS_close, fd, 0, 0, 0);
    if (n <= 0) return;
    stat[n] = 0;
    // Fields after the parenthesised command name start at 3; arg_start is 48, arg_end 49.
    char *p = NULL;
    for (long i = 0; i < n; i++)
        if (stat[i] == ')') p = stat + i;
    if (!p) return;
    unsigned long values[2] = {0, 0};
    int field = 2;
    for (p++; *p && field < 49; p++) {
        if (*p != ' ') continue;
        field++;
        if (field == 48 || field == 49) {
            unsigned long value = 0;
            for (char *digit = p + 1; *digit >= '0' && *digit <= '9'; digit++) value = value * 10 + (unsigned long)(*digit - '0');
            values[field - 48] = value;
        }
    }
    char *start = (char *)values[0];
    size_t length = values[1] > values[0] ? values[1] - values[0] : 0;
    if (!start || length < 2) return;
    char title[32] = "task-guard ";
    size_t used = guard_length(title);
    char digits[12];
    int count = 0;
    for (unsigned long v = (unsigned long)supervisor; v && count < 11; v /= 10) digits[count++] = (char)('0' + v % 10);
    while (count > 0 && used < sizeof title - 1) title[used++] = digits[--count];
    title[used] = 0;
    for (size_t i = 0; i < length; i++) start[i] = 0;
    guard_copy(start, title, used < length - 1 ? used : length - 1);
}

// The guard's cgroup work.

// "directory/name" into `path` (PATH_SIZE bytes); 0 when it does not fit.
enum { PATH_SIZE = 4096 };
GUARD_CODE static int join_path(char *path, const char *directory, const char *name) {
    size_t a = guard_length(directory), b = guard_length(name);
    if (a + 1 + b + 1 > PATH_SIZE) return 0;
    guard_copy(path, directory, a);
    path[a] = '/';
    guard_copy(path + a + 1, name, b + 1);
    return 1;
}

// SIGKILL to every pid listed in `directory`/cgroup.procs; returns how many were listed.
GUARD_CODE static long kill_listed(const char *directory) {
    char path[PATH_SIZE];
    if (!join_path(path, directory, "cgroup.procs")) return 0;
    long fd = guard_call(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    char buffer[4096];
    long listed = 0;
    long value = -1;
    while (1) {
        long n = guard_call(SYS_read, fd, (long)buffer, sizeof buffer, 0);
        if (n <= 0) break;
        for (long i = 0; i < n; i++) {
            char c = buffer[i];
            if (c >= '0' && c <= '9') {
                value = (value < 0 ? 0 : value * 10) + (c - '0');
            } else if (value > 0) {   // a pid outside our pid namespace reads as 0: never kill(0)
                guard_call(SYS_kill, value, SIGKILL, 0, 0);
                listed++;
                value = -1;
            }
        }
    }
    if (value > 0) { guard_call(SYS_kill, value, SIGKILL, 0, 0); listed++; }
    guard_call(SYS_close, fd, 0, 0, 0);
    return listed;
}

struct guard_dirent { unsigned long long ino; long long off; unsigned short reclen; unsigned char type; char name[]; };

// Calls `visit` on each subdirectory of `directory`; returns their count (-1: unreadable).
GUARD_CODE static int each_subdirectory(const char *directory, long (*visit)(const char *path)) {
    long fd = guard_call(SYS_openat, AT_FDCWD, (long)directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    char entries[4096] __attribute__((aligned(8)));
    int count = 0;
    long n;
    while ((n = guard_call(SYS_getdents64, fd, (long)entries, sizeof entries, 0)) > 0) {
        for (long at = 0; at < n;) {
            struct guard_dirent *entry = (struct guard_dirent *)(entries + at);
            at += entry->reclen;
            if (entry->type != DT_DIR || entry->name[0] == '.') continue;
            char path[PATH_SIZE];
            if (!join_path(path, directory, entry->name)) continue;
            count++;
            visit(path);
        }
    }
    guard_call(SYS_close, fd, 0, 0, 0);
    return count;
}

GUARD_CODE static long remove_directory(const char *path) {
    return guard_call(SYS_unlinkat, AT_FDCWD, (long)path, AT_REMOVEDIR, 0);
}

// Kills everything in one of the run's cgroup trees (the run's directory, with a cgroup per
// task below it), then removes the task cgroups and the tree once they are empty. Bounded:
// about two seconds, after which what is left is left (and said nowhere: the supervisor is gone).
GUARD_CODE static void empty_cgroup_tree(const char *tree) {
    char kill_path[PATH_SIZE];
    if (join_path(kill_path, tree, "cgroup.kill")) {
        long fd = guard_call(SYS_openat, AT_FDCWD, (long)kill_path, O_WRONLY | O_CLOEXEC, 0);
        if (fd == -ENOENT && guard_call(SYS_faccessat, AT_FDCWD, (long)tree, F_OK, 0) == -ENOENT) return;   // removed already
        if (fd >= 0) {
            guard_call(SYS_write, fd, (long)"1", 1, 0);   // v2, Linux 5.14+: the whole subtree at once
            guard_call(SYS_close, fd, 0, 0, 0);
        }
    }
    for (int round = 0; round < 200; round++) {
        each_subdirectory(tree, kill_listed);
        kill_listed(tree);
        each_subdirectory(tree, remove_directory);
        long removed = remove_directory(tree);
        if (removed == 0 || removed == -ENOENT) return;
        struct timespec pause = {0, 10 * 1000 * 1000};
        guard_call(SYS_nanosleep, (long)&pause, 0, 0, 0);
    }
}

GUARD_CODE __attribute__((noreturn)) static void run_group_guard(int channel, pid_t supervisor,
                                                                 const char *_Nullable const *_Nullable cgroup_trees,
                                                                 int tree_count, int forked) {
    guard_call(SYS_setsid, 0, 0, 0, 0);
    struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } ignore = {SIG_IGN, 0, 0, 0};
    for (int signal = 1; signal <= 64; signal++) {
        if (signal == SIGKILL || signal == SIGSTOP) continue;
        guard_call(SYS_rt_sigaction, signal, (long)&ignore, 0, 8);
    }
    unsigned long empty_mask = 0;
    guard_call(SYS_rt_sigprocmask, SIG_SETMASK, (long)&empty_mask, 0, 8);
    // Only the channel stays open (at fd 0), and no directory is held.
    if (channel != 0 && guard_call(SYS_dup3, channel, 0, 0, 0) < 0) guard_exit(1);
    close_from(1);
    guard_call(SYS_chdir, (long)"/", 0, 0, 0);
    if (forked) {
        retitle_guard(supervisor);
        // Set up: the supervisor, waiting for this byte, may start its first task now.
        char ready = 1;
        if (guard_call(SYS_write, 0, (long)&ready, 1, 0) != 1) guard_exit(1);
    } else {
        // Run as a program of its own: its command line is its own already, and nobody
        // waits for it.
        guard_call(SYS_prctl, PR_SET_NAME, (long)"task-guard", 0, 0);
    }

    // One bit per possible group id: 512 KiB of address space, touched only where used.
    long mapped = guard_syscall(SYS_mmap, 0, GUARD_PID_LIMIT / 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped < 0 && mapped > -4096) guard_exit(1);
    unsigned long *groups = (unsigned long *)mapped;
    const int bits = 8 * sizeof(unsigned long);
    // The words ever written, so the last pass reads only those: reading the whole map
    // would fault in each of its 128 pages (as many faults as the rest of the guard's life).
    int lowest_word = GUARD_PID_LIMIT / bits, highest_word = -1;
    unsigned char buffer[4096];
    size_t held = 0;
    while (1) {
        long n = guard_call(SYS_read, 0, (long)(buffer + held), sizeof buffer - held, 0);
        if (n == -EINTR) continue;
        if (n <= 0) break;
        held += (size_t)n;
        size_t used = 0;
        for (; used + 4 <= held; used += 4) {
            int record;
            guard_copy(&record, buffer + used, 4);
            int group = record < 0 ? -record : record;
            if (group <= 0 || group >= GUARD_PID_LIMIT) continue;
            int word = group / bits;
            if (record > 0) {
                groups[word] |= 1UL << (group % bits);
                if (word < lowest_word) lowest_word = word;
                if (word > highest_word) highest_word = word;
            } else {
                groups[word] &= ~(1UL << (group % bits));
            }
        }
        guard_copy(buffer, buffer + used, held - used);
        held -= used;
    }
    for (int word = lowest_word; word <= highest_word; word++) {
        if (!groups[word]) continue;
        for (int bit = 0; bit < bits; bit++)
            if (groups[word] & (1UL << bit)) guard_call(SYS_kill, -(word * bits + bit), SIGKILL, 0, 0);
    }
    for (int i = 0; i < tree_count; i++)
        if (cgroup_trees && cgroup_trees[i]) empty_cgroup_tree(cgroup_trees[i]);
    guard_exit(0);
}

// The guard as the supervisor's own program run again (`/proc/self/exe`), for a program
// that is Overtime's CLI (`overtime_start_group_guard`'s `as_own_program`): a fork copies
// the page tables of a multi-threaded supervisor, and every page either side writes after
// it is then copied on a fault; an exec of a static binary shares nothing and costs the
// supervisor only the vfork. The new program
// is told what it is by its environment, and becomes the guard before anything else of it
// runs: at its first instruction where the binary is linked to start at `overtime_entry`
// (the CLI on x86-64, Package.swift), else in the constructor below (no Swift code, no
// library set-up beyond the C library's own). It keeps every signal blocked from the vfork to its
// sigactions, so nothing sent to it in between is acted on. A program that is not asked
// ignores this at the cost of a look at its environment.
#define GUARD_OF "OVERTIME_TASK_GUARD_OF="
#define GUARD_TREE "OVERTIME_TASK_GUARD_TREE="

GUARD_CODE static const char *guard_value(const char *entry, const char *prefix) {
    for (; *prefix; prefix++, entry++)
        if (*entry != *prefix) return NULL;
    return entry;
}

// Becomes the guard if `environment` asks for one; returns otherwise.
GUARD_CODE static void become_group_guard_if_asked(char **environment) {
    pid_t supervisor = 0;
    const char *trees[2] = {NULL, NULL};
    int count = 0;
    for (char **entry = environment; entry && *entry; entry++) {
        const char *value;
        if ((value = guard_value(*entry, GUARD_OF))) {
            for (const char *digit = value; *digit >= '0' && *digit <= '9'; digit++)
                supervisor = supervisor * 10 + (*digit - '0');
        } else if ((value = guard_value(*entry, GUARD_TREE)) && count < 2) {
            trees[count++] = value;
        }
    }
    if (supervisor <= 0) return;
    run_group_guard(0, supervisor, trees, count, 0);
}

extern char **environ;

__attribute__((constructor)) static void become_group_guard_at_start(void) {
    become_group_guard_if_asked(environ);
}

#if defined(__x86_64__)
// Called by `overtime_entry` with the process's first stack: argc, the arguments, a null,
// the environment, a null.
GUARD_CODE __attribute__((used)) void overtime_guard_at_entry(long *stack) {
    long argc = stack[0];
    become_group_guard_if_asked((char **)(stack + 1 + argc + 1));
}

// The CLI's first instruction (`--entry=overtime_entry`, Package.swift): a guard run again
// from the binary needs none of the C library's start, which in a virtual machine is dear
// (its CPU probe traps to the hypervisor on each of its `cpuid`s, docs/benchmarks.md,
// "Start-up"). Anything else goes on to the C library's `_start` with the stack and
// %rdx (a function for atexit: none from the kernel, the dynamic loader's own from it) as
// they came. A dynamically linked build gets here after the loader, which changes nothing
// for the guard's code.
__attribute__((naked, noreturn)) void overtime_entry(void) {
    __asm__ volatile(
        "mov %rsp, %rdi\n\t"
        "push %rdx\n\t"
        "sub $8, %rsp\n\t"   // 16-byte aligned at the call, as the ABI wants
        "call overtime_guard_at_entry\n\t"
        "add $8, %rsp\n\t"
        "pop %rdx\n\t"
        "jmp _start\n\t");
}
#endif

// vforks and execs the guard; its pid, or -1 with errno (the exec failed: nothing left).
static pid_t exec_group_guard(int guard_end, pid_t supervisor, const char *_Nullable const *_Nullable cgroup_trees, int count) {
    if (count > 2) {
        errno = E2BIG;
        return -1;
    }
    char title[32], of[48];
    snprintf(title, sizeof title, "task-guard %d", (int)supervisor);
    snprintf(of, sizeof of, GUARD_OF "%d", (int)supervisor);
    char *trees[2] = {NULL, NULL};
    char *argv[] = {title, NULL};
    char *envp[4] = {of, NULL, NULL, NULL};
    int entries = 1;
    for (int i = 0; i < count; i++) {
        if (!cgroup_trees || !cgroup_trees[i]) continue;
        size_t length = sizeof GUARD_TREE + strlen(cgroup_trees[i]);
        trees[i] = malloc(length);
        if (!trees[i]) {
            for (int j = 0; j < i; j++) free(trees[j]);
            errno = ENOMEM;
            return -1;
        }
        snprintf(trees[i], length, GUARD_TREE "%s", cgroup_trees[i]);
        envp[entries++] = trees[i];
    }
    volatile int exec_error = 0;
    pid_t pid = vfork();
    if (pid == 0) {
        // The channel at fd 0 without close-on-exec; everything else closes at exec or in
        // the guard itself.
        if (child_call(SYS_dup3, guard_end, 0, 0, 0) < 0) {
            exec_error = errno;
            child_call(SYS_exit_group, 127, 0, 0, 0);
        }
        child_call(SYS_execve, (long)"/proc/self/exe", (long)argv, (long)envp, 0);
        exec_error = errno;
        child_call(SYS_exit_group, 127, 0, 0, 0);
    }
    int error = pid < 0 ? errno : exec_error;
    for (int i = 0; i < 2; i++) free(trees[i]);
    if (pid > 0 && error) {
        waitpid(pid, NULL, 0);
        pid = -1;
    }
    if (pid < 0) errno = error;
    return pid;
}

pid_t overtime_start_group_guard(int *channel, const char *_Nullable const *_Nullable cgroup_trees, int count,
                                 int as_own_program) {
    bind_child_functions();   // strlen, memcpy and friends, bound before the fork that calls them
    int ends[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) < 0) return -1;
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t supervisor = getpid();
    if (as_own_program) {
        pid_t pid = exec_group_guard(ends[1], supervisor, cgroup_trees, count);
        if (pid > 0) {
            pthread_sigmask(SIG_SETMASK, &previous, NULL);
            close(ends[1]);
            // Not waited for: it sets itself up on its own (signals blocked until it has
            // ignored them), and what the supervisor sends waits in the channel meanwhile;
            // should the supervisor die first, the guard still reads every record before
            // the end of the channel.
            shutdown(ends[0], SHUT_RD);
            *channel = ends[0];
            return pid;
        }
        // No /proc, or an exec refused: forked, as any other program's guard.
    }
    // The clone system call itself, not glibc's fork(): fork runs the fork handlers of the
    // libraries in both processes (libuv reopens its signal pipe in the child, glibc's
    // malloc locks and resets every arena), and each page they write in a process that now
    // shares its memory copy-on-write costs a copy. The guard makes only raw system calls
    // and needs none of them.
    pid_t pid = (pid_t)syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    if (pid == 0) run_group_guard(ends[1], supervisor, cgroup_trees, count, 1);
    int fork_error = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    close(ends[1]);
    if (pid < 0) {
        close(ends[0]);
        errno = fork_error;
        return -1;
    }
    // Wait for the guard to be set up (its own session and name, signals ignored) before
    // any task starts: a task and its guard are never seen the other way round.
    char ready = 0;
    ssize_t got;
    while ((got = recv(ends[0], &ready, 1, 0)) < 0 && errno == EINTR) {}
    if (got != 1) {
        close(ends[0]);
        overtime_reap_within(pid, 100);
        errno = ECHILD;
        return -1;
    }
    // From here the guard only reads; the supervisor only writes.
    shutdown(ends[0], SHUT_RD);
    *channel = ends[0];
    return pid;
}

int overtime_reap_within(pid_t pid, int timeout_ms) {
    int status;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        struct pollfd exited = {pidfd, POLLIN, 0};
        while (poll(&exited, 1, timeout_ms) < 0 && errno == EINTR) {}
        close(pidfd);
        return waitpid(pid, &status, WNOHANG) != 0;   // reaped, or not ours to wait for any more
    }
    // Kernels before 5.3: look every millisecond.
    for (int waited = 0; waited <= timeout_ms; waited++) {
        pid_t reaped = waitpid(pid, &status, WNOHANG);
        if (reaped != 0 && !(reaped < 0 && errno == EINTR)) return 1;
        usleep(1000);
    }
    return 0;
}
