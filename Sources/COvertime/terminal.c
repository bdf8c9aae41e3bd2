#define _GNU_SOURCE
#include "overtime_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

int overtime_copy_window_size(int from, int reader) {
    struct winsize size;
    if (ioctl(from, TIOCGWINSZ, &size) != 0) return -1;
    return ioctl(reader, TIOCSWINSZ, &size);
}

int overtime_open_output_terminal(int size_from, int *reader, int *terminal) {
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0) return -1;
    int slave = -1;
    if (grantpt(master) == 0 && unlockpt(master) == 0) {
        // The peer straight from the master (Linux 4.13+), else by its name.
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0) {
            char name[64];
            if (ptsname_r(master, name, sizeof name) == 0) slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        }
    }
    struct termios modes;
    if (slave < 0 || tcgetattr(slave, &modes) != 0) goto fail;
    modes.c_oflag &= ~(tcflag_t)OPOST;
    if (tcsetattr(slave, TCSANOW, &modes) != 0) goto fail;
    if (size_from >= 0) overtime_copy_window_size(size_from, master);  // not a terminal: no size
    *reader = master;
    *terminal = slave;
    return 0;
fail:;
    int saved = errno;
    if (slave >= 0) close(slave);
    close(master);
    errno = saved;
    return -1;
}
