// The practical limit for spawn+reap: glibc's posix_spawn (clone with CLONE_VM|CLONE_VFORK,
// so no address-space copy) and waitpid(-1), keeping CONCURRENCY children in flight. Each
// child gets a session of its own, as Overtime's tasks do, so the work is the same.
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: spawnloop COUNT CONCURRENCY PATH [ARG...]\n"); return 2; }
    int count = atoi(argv[1]), concurrency = atoi(argv[2]);
    char **child_argv = argv + 3;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int started = 0, running = 0, failures = 0;
    while (started < count || running > 0) {
        while (running < concurrency && started < count) {
            pid_t pid;
            int rc = posix_spawn(&pid, child_argv[0], NULL, &attr, child_argv, environ);
            if (rc != 0) { fprintf(stderr, "spawnloop: posix_spawn: error %d\n", rc); return 1; }
            started++;
            running++;
        }
        int status;
        if (waitpid(-1, &status, 0) < 0) { perror("spawnloop: waitpid"); return 1; }
        running--;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("count=%d concurrency=%d failures=%d seconds=%.6f tasks_per_sec=%.1f\n",
           count, concurrency, failures, s, count / s);
    return failures ? 1 : 0;
}
