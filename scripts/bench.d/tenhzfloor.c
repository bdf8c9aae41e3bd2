// The kernel's floor of hearing TASKS tasks' progress at 10 Hz: each task's own stream on
// its fd 3 (a socketpair, as the protocol has it), all watched by one epoll and read as
// they come, with nothing done with a line but counting it; with a FIGURE_FILE, also a
// pread of it, kept open once per task, for every task four times a second (the memory
// watchdog's samples). At most one poll a millisecond, the rest of it slept out first, so
// that one poll serves every stream that became ready meanwhile: the pacing Overtime's loop
// does at this rate. Prints the process's own CPU (not its children's) over a steady
// window, from 2 s after the last task started to 1 s before the first ends.
//   tenhzfloor TASKS SECONDS TICK_PATH [FIGURE_FILE]
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double own_cpu(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: tenhzfloor TASKS SECONDS TICK_PATH [FIGURE_FILE]\n"); return 2; }
    int tasks = atoi(argv[1]);
    double seconds = atof(argv[2]);
    const char *figure_path = argc > 4 ? argv[4] : NULL;
    int envc = 0;
    while (environ[envc]) envc++;
    char **child_env = calloc((size_t)envc + 2, sizeof *child_env);
    memcpy(child_env, environ, (size_t)envc * sizeof *child_env);
    child_env[envc] = "OVERTIME_FD=3";
    char *child_argv[] = { argv[3], argv[2], NULL };
    int poller = epoll_create1(EPOLL_CLOEXEC);
    int *channels = calloc((size_t)tasks, sizeof *channels);
    int *figures = calloc((size_t)tasks, sizeof *figures);
    double first_start = now();
    for (int i = 0; i < tasks; i++) {
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) { perror("tenhzfloor: socketpair"); return 1; }
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, pair[1], 3);
        pid_t pid;
        int rc = posix_spawn(&pid, argv[3], &actions, NULL, child_argv, child_env);
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) { fprintf(stderr, "tenhzfloor: posix_spawn: error %d\n", rc); return 1; }
        close(pair[1]);
        channels[i] = pair[0];
        struct epoll_event readable = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(poller, EPOLL_CTL_ADD, pair[0], &readable);
        figures[i] = figure_path ? open(figure_path, O_RDONLY | O_CLOEXEC) : -1;
        if (figure_path && figures[i] < 0) { perror("tenhzfloor: open the figure file"); return 1; }
    }
    double last_start = now();
    double window_open = last_start + 2, window_close = first_start + seconds - 1;
    double cpu_open = -1, cpu_close = -1, wall_open = 0, wall_close = 0, next_sample = now() + 0.25, last_poll = 0;
    long lines = 0, lines_at_open = 0, window_lines = 0;
    int open_channels = tasks;
    char buffer[4096];
    while (open_channels > 0) {
        double t = now();
        if (cpu_open < 0 && t >= window_open) { cpu_open = own_cpu(); wall_open = t; lines_at_open = lines; }
        if (cpu_close < 0 && cpu_open >= 0 && t >= window_close) { cpu_close = own_cpu(); wall_close = t; window_lines = lines - lines_at_open; }
        if (figure_path && t >= next_sample) {
            for (int i = 0; i < tasks; i++)
                if (channels[i] >= 0 && pread(figures[i], buffer, 32, 0) < 0) { perror("tenhzfloor: pread"); return 1; }
            next_sample += 0.25;
        }
        if (t - last_poll < 0.001) {
            struct timespec pause = { 0, (long)((0.001 - (t - last_poll)) * 1e9) };
            nanosleep(&pause, NULL);
        }
        last_poll = now();
        int timeout = figure_path ? (int)((next_sample - last_poll) * 1000) + 1 : 100;
        struct epoll_event ready[256];
        int k = epoll_wait(poller, ready, 256, timeout < 0 ? 0 : timeout);
        if (k < 0) { if (errno == EINTR) continue; perror("tenhzfloor: epoll_wait"); return 1; }
        for (int e = 0; e < k; e++) {
            int i = (int)ready[e].data.u32;
            ssize_t got = read(channels[i], buffer, sizeof buffer);
            if (got > 0) {
                for (ssize_t b = 0; b < got; b++) if (buffer[b] == '\n') lines++;
            } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                close(channels[i]);   // leaves the epoll set with it
                channels[i] = -1;
                open_channels--;
            }
        }
    }
    while (wait(NULL) > 0) {}
    long written = (long)tasks * (long)(seconds * 10);
    if (lines != written) { fprintf(stderr, "tenhzfloor: %ld lines read, %ld written\n", lines, written); return 1; }
    if (cpu_close < 0) { fprintf(stderr, "tenhzfloor: no steady window (the tasks took %.1f s to start)\n", last_start - first_start); return 1; }
    printf("cpu_seconds=%.3f window_seconds=%.3f lines=%ld\n", cpu_close - cpu_open, wall_close - wall_open, window_lines);
    return 0;
}
