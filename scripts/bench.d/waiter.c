// Waits for SIGTERM and appends the CLOCK_REALTIME instant it arrived (microseconds since
// the epoch) to FILE, from the handler (clock_gettime and write are async-signal-safe), then
// exits 0. `waiter FILE`.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int out = -1;

static void on_term(int sig) {
    (void)sig;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    long long us = (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
    char buf[32];
    int n = 0;
    char digits[24];
    int k = 0;
    for (long long v = us; v > 0; v /= 10) digits[k++] = (char)('0' + v % 10);
    while (k > 0) buf[n++] = digits[--k];
    buf[n++] = '\n';
    (void)!write(out, buf, (size_t)n);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: waiter FILE\n"); return 2; }
    out = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (out < 0) { perror("waiter: open"); return 1; }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    for (;;) pause();
}
