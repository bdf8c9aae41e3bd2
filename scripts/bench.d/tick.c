// A task reporting at 10 Hz: `tick SECONDS` writes {"type":"progress","completed":K,"total":N}
// (N = SECONDS x 10) to the fd named by OVERTIME_FD every 100 ms (absolute clock_nanosleep, so
// no drift), N lines in all, then exits 0.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 15;
    const char *env = getenv("OVERTIME_FD");
    if (!env) { fprintf(stderr, "tick: no OVERTIME_FD\n"); return 2; }
    int fd = atoi(env);
    long count = (long)(seconds * 10);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long k = 1; k <= count; k++) {
        char line[96];
        int n = snprintf(line, sizeof line, "{\"type\":\"progress\",\"completed\":%ld,\"total\":%ld}\n", k, count);
        if (write(fd, line, (size_t)n) != n) { perror("tick: write"); return 1; }
        next.tv_nsec += 100000000;
        if (next.tv_nsec >= 1000000000) { next.tv_nsec -= 1000000000; next.tv_sec++; }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {}
    }
    return 0;
}
