// Starts COUNT GNU timeouts that all expire at one instant: `timeouts COUNT AT_US FILE`
// forks and execs `timeout D waiter FILE` COUNT times, each D = AT_US (CLOCK_REALTIME,
// microseconds) - now at its launch, then reaps them all. Prints how many timed out (exit
// 124) and how late the last launch was before the instant.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: timeouts COUNT AT_US WAITER FILE\n"); return 2; }
    int count = atoi(argv[1]);
    long long at = atoll(argv[2]);
    long long lead = 0;
    for (int i = 0; i < count; i++) {
        long long left = at - now_us();
        if (left <= 0) { fprintf(stderr, "timeouts: the instant passed before launch %d\n", i); return 1; }
        lead = left;
        char d[32];
        snprintf(d, sizeof d, "%lld.%06lld", left / 1000000, left % 1000000);
        pid_t pid = fork();
        if (pid < 0) { perror("timeouts: fork"); return 1; }
        if (pid == 0) {
            execlp("timeout", "timeout", d, argv[3], argv[4], (char *)NULL);
            _exit(127);
        }
    }
    int timed_out = 0, other = 0, status;
    while (wait(&status) > 0) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 124) timed_out++; else other++;
    }
    printf("timed_out=%d other=%d lead_us=%lld\n", timed_out, other, lead);
    return other ? 1 : 0;
}
