// pairtime PAIRS ::: A ARGS... ::: B ARGS...: runs A and B in alternating pairs, PAIRS times
// after 20 warm-up pairs, the order within each pair swapped every time (A B, B A, A B, ...)
// so that neither always runs first. Each run is timed from posix_spawn to its reaping,
// stdout and stderr to /dev/null, and must exit 0. Prints, as KEY=VALUE on one line, each
// one's median wall time, CPU time (user + system, from wait4) and minor page faults a run,
// and the median of the pairs' wall ratios A/B: a machine whose speed drifts moves both of
// a pair alike, where two blocks of runs one after the other (hyperfine's) each get a
// machine of their own. Used by scripts/bench (overtime run against tini) and by
// scripts/pair-builds (a build against another); docs/benchmarks.md, "Two builds, paired".
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct run { double wall, cpu, faults; };

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static double seconds(struct timeval t) { return t.tv_sec + t.tv_usec / 1e6; }
static int ascending(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static double median(double *v, int n) { qsort(v, n, sizeof *v, ascending); return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; }

static struct run timed(char **argv, posix_spawn_file_actions_t *actions) {
    pid_t pid;
    double start = now();
    int rc = posix_spawn(&pid, argv[0], actions, NULL, argv, environ);
    if (rc != 0) { fprintf(stderr, "pairtime: posix_spawn %s: %s\n", argv[0], strerror(rc)); exit(1); }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) != pid) { perror("pairtime: wait4"); exit(1); }
    double wall = now() - start;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { fprintf(stderr, "pairtime: %s did not exit 0\n", argv[0]); exit(1); }
    return (struct run){wall, seconds(usage.ru_utime) + seconds(usage.ru_stime), (double)usage.ru_minflt};
}

int main(int argc, char **argv) {
    const char *usage = "usage: pairtime PAIRS ::: A ARGS... ::: B ARGS...\n";
    if (argc < 6 || strcmp(argv[2], ":::") != 0) { fputs(usage, stderr); return 2; }
    int pairs = atoi(argv[1]);
    char **a = argv + 3, **b = NULL;
    for (int i = 3; i < argc; i++)
        if (strcmp(argv[i], ":::") == 0) { argv[i] = NULL; b = argv + i + 1; break; }
    if (pairs < 1 || !*a || !b || !*b) { fputs(usage, stderr); return 2; }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    for (int i = 0; i < 20; i++) { timed(a, &actions); timed(b, &actions); }
    // Per side: wall, CPU, faults; and the pairs' wall ratios.
    double *columns = malloc(7 * (size_t)pairs * sizeof *columns);
    if (!columns) { fputs("pairtime: out of memory\n", stderr); return 1; }
    double *wall_a = columns, *cpu_a = wall_a + pairs, *faults_a = cpu_a + pairs;
    double *wall_b = faults_a + pairs, *cpu_b = wall_b + pairs, *faults_b = cpu_b + pairs, *ratio = faults_b + pairs;
    for (int i = 0; i < pairs; i++) {
        struct run ra, rb;
        if (i % 2 == 0) { ra = timed(a, &actions); rb = timed(b, &actions); }
        else { rb = timed(b, &actions); ra = timed(a, &actions); }
        wall_a[i] = ra.wall; cpu_a[i] = ra.cpu; faults_a[i] = ra.faults;
        wall_b[i] = rb.wall; cpu_b[i] = rb.cpu; faults_b[i] = rb.faults;
        ratio[i] = ra.wall / rb.wall;
    }
    printf("a_median_ms=%.3f a_cpu_ms=%.3f a_faults=%.0f b_median_ms=%.3f b_cpu_ms=%.3f b_faults=%.0f ratio_median=%.3f\n",
           median(wall_a, pairs) * 1e3, median(cpu_a, pairs) * 1e3, median(faults_a, pairs),
           median(wall_b, pairs) * 1e3, median(cpu_b, pairs) * 1e3, median(faults_b, pairs), median(ratio, pairs));
    free(columns);
    return 0;
}
