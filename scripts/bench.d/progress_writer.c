// Floods the Overtime channel with progress lines as fast as write(2) allows: formats into
// a 1 MiB buffer by hand (no printf per line) and writes it whole, so the writer is never
// what limits the reader. Without OVERTIME_FD it writes the same bytes to stdout, so
// `progress_writer | wc -l` reads the identical stream. `progress_writer N socket` writes
// them on a connection to the task's OVERTIME_SOCKET instead (another process's path).
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int connect_task_socket(void) {
    const char *address = getenv("OVERTIME_SOCKET");
    if (!address || !*address) { fprintf(stderr, "progress_writer: no OVERTIME_SOCKET\n"); exit(1); }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strlen(address);
    if (n >= sizeof sa.sun_path) { fprintf(stderr, "progress_writer: address too long\n"); exit(1); }
    memcpy(sa.sun_path, address, n);
    socklen_t length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    if (address[0] == '@') { sa.sun_path[0] = 0; length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n); }
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, length) != 0) { perror("progress_writer: connect"); exit(1); }
    return fd;
}

static char buf[1 << 20];

static void flush(int fd, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, buf + off, len - off);
        if (n < 0) { if (errno == EINTR) continue; perror("progress_writer: write"); exit(1); }
        off += (size_t)n;
    }
}

int main(int argc, char **argv) {
    long total = argc > 1 ? atol(argv[1]) : 1000000;
    const char *env = getenv("OVERTIME_FD");
    int fd = env ? atoi(env) : 1;
    if (argc > 2 && strcmp(argv[2], "socket") == 0) fd = connect_task_socket();
    static const char head[] = "{\"type\":\"progress\",\"completed\":";
    char tail[64];
    int tail_len = snprintf(tail, sizeof tail, ",\"total\":%ld}\n", total);
    size_t len = 0;
    for (long n = 1; n <= total; n++) {
        if (len > sizeof buf - 128) { flush(fd, len); len = 0; }
        memcpy(buf + len, head, sizeof head - 1);
        len += sizeof head - 1;
        char digits[24];
        int k = 0;
        for (long v = n; v > 0; v /= 10) digits[k++] = (char)('0' + v % 10);
        while (k > 0) buf[len++] = digits[--k];
        memcpy(buf + len, tail, (size_t)tail_len);
        len += (size_t)tail_len;
    }
    flush(fd, len);
    return 0;
}
