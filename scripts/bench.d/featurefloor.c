// The kernel's floor of a batch's per-task features: what no supervisor can skip and keep
// them, done with the cheapest system calls and nothing else (no parsing, no state beyond
// an array). Per task: its log file created on disk as the child's stdout and stderr, a
// socketpair as its fd 3 (the progress channel) watched by epoll until EOF, three kept
// cgroup figures read at its end (pread), and three journal lines appended. Children start
// by posix_spawn with a session of their own, as in the C loop; their exits come through a
// signalfd. Left out, so the floor is if anything low: the task's cgroup (CLONE_INTO_CGROUP
// needs clone3, which posix_spawn does not use), its socket and readiness socket, the task
// guard's records, budgets and timers.
//   featurefloor COUNT CONCURRENCY RUN_DIR FIGURE_FILE PATH [ARG...]
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct slot { pid_t pid; int channel; int exited; int status; int index; };

static void append(int journal, const char *line, int length) {
    if (write(journal, line, (size_t)length) != length) { perror("featurefloor: journal"); exit(1); }
}

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: featurefloor COUNT CONCURRENCY RUN_DIR FIGURE_FILE PATH [ARG...]\n"); return 2; }
    int count = atoi(argv[1]), concurrency = atoi(argv[2]);
    const char *run = argv[3];
    char **child_argv = argv + 5;
    char path[4096], line[512], buffer[4096];
    snprintf(path, sizeof path, "%s/logs", run);
    if ((mkdir(run, 0755) != 0 && errno != EEXIST) || (mkdir(path, 0755) != 0 && errno != EEXIST)) { perror("featurefloor: mkdir"); return 1; }
    snprintf(path, sizeof path, "%s/events.jsonl", run);
    int journal = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (journal < 0) { perror("featurefloor: open the journal"); return 1; }
    // The figures kept open, as a supervisor keeps a reused cgroup's (usage, peak, CPU).
    int figures[3];
    for (int i = 0; i < 3; i++) {
        figures[i] = open(argv[4], O_RDONLY | O_CLOEXEC);
        if (figures[i] < 0) { perror("featurefloor: open the figure file"); return 1; }
    }
    sigset_t chld, none;
    sigemptyset(&chld);
    sigemptyset(&none);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int exits = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    int poller = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event watch = { .events = EPOLLIN, .data.u64 = UINT64_MAX };
    epoll_ctl(poller, EPOLL_CTL_ADD, exits, &watch);
    int envc = 0;
    while (environ[envc]) envc++;
    char **child_env = calloc((size_t)envc + 2, sizeof *child_env);
    memcpy(child_env, environ, (size_t)envc * sizeof *child_env);
    child_env[envc] = "OVERTIME_FD=3";
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setsigmask(&attr, &none);
    struct slot *slots = calloc((size_t)concurrency, sizeof *slots);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int started = 0, running = 0, failures = 0;
    while (started < count || running > 0) {
        for (int s = 0; s < concurrency && started < count; s++) {
            if (slots[s].pid != 0) continue;
            int index = started++;
            snprintf(path, sizeof path, "%s/logs/t%d.log", run, index);
            int log = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            int pair[2];
            if (log < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) { perror("featurefloor: log or channel"); return 1; }
            posix_spawn_file_actions_t actions;
            posix_spawn_file_actions_init(&actions);
            posix_spawn_file_actions_adddup2(&actions, log, 1);
            posix_spawn_file_actions_adddup2(&actions, log, 2);
            posix_spawn_file_actions_adddup2(&actions, pair[1], 3);
            append(journal, line, snprintf(line, sizeof line, "{\"event\":\"attempt\",\"task\":\"t%d\"}\n", index));
            pid_t pid;
            int rc = posix_spawn(&pid, child_argv[0], &actions, &attr, child_argv, child_env);
            posix_spawn_file_actions_destroy(&actions);
            if (rc != 0) { fprintf(stderr, "featurefloor: posix_spawn: error %d\n", rc); return 1; }
            close(log);
            close(pair[1]);
            slots[s] = (struct slot){ .pid = pid, .channel = pair[0], .index = index };
            struct epoll_event readable = { .events = EPOLLIN, .data.u64 = (uint64_t)s };
            epoll_ctl(poller, EPOLL_CTL_ADD, pair[0], &readable);
            append(journal, line, snprintf(line, sizeof line, "{\"event\":\"started\",\"task\":\"t%d\",\"pid\":%d}\n", index, pid));
            running++;
        }
        struct epoll_event ready[64];
        int k = epoll_wait(poller, ready, 64, -1);
        if (k < 0) { if (errno == EINTR) continue; perror("featurefloor: epoll_wait"); return 1; }
        for (int e = 0; e < k; e++) {
            if (ready[e].data.u64 == UINT64_MAX) {
                struct signalfd_siginfo info;
                while (read(exits, &info, sizeof info) == sizeof info) {}
                int status;
                pid_t pid;
                while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                    for (int s = 0; s < concurrency; s++)
                        if (slots[s].pid == pid) { slots[s].exited = 1; slots[s].status = status; }
            } else {
                struct slot *slot = &slots[ready[e].data.u64];
                ssize_t got = read(slot->channel, buffer, sizeof buffer);
                if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
                    close(slot->channel);   // leaves the epoll set with it
                    slot->channel = -1;
                }
            }
        }
        // A task ends when it has exited and its channel has closed.
        for (int s = 0; s < concurrency; s++) {
            struct slot *slot = &slots[s];
            if (slot->pid == 0 || !slot->exited || slot->channel >= 0) continue;
            for (int i = 0; i < 3; i++) if (pread(figures[i], buffer, sizeof buffer, 0) < 0) { perror("featurefloor: pread"); return 1; }
            if (!WIFEXITED(slot->status) || WEXITSTATUS(slot->status) != 0) failures++;
            append(journal, line, snprintf(line, sizeof line, "{\"event\":\"exited\",\"task\":\"t%d\",\"status\":%d}\n", slot->index, WEXITSTATUS(slot->status)));
            slot->pid = 0;
            slot->exited = 0;
            running--;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("count=%d concurrency=%d failures=%d seconds=%.6f tasks_per_sec=%.1f\n", count, concurrency, failures, s, count / s);
    return failures ? 1 : 0;
}
