"""A filesystem whose files never give their bytes: FUSE (Debian's python3-fusepy) mounted
at argv[1], holding one file, `hangs.log`, 100 bytes by stat, whose every read waits for
good. The tests use it for what no frozen ext4 gives (a frozen one
still answers reads): a read that does not come back, as from a dead NFS server.
Runs in the foreground until killed: its death aborts the FUSE connection, which ends the
waiting reads with an error (`umount -l MOUNTPOINT` alone leaves them waiting)."""

import stat
import sys
import threading
import time

from fusepy import FUSE, Operations


class Hanging(Operations):
    def getattr(self, path, fh=None):
        now = time.time()
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2, st_ctime=now, st_mtime=now, st_atime=now)
        if path == "/hangs.log":
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=100, st_ctime=now, st_mtime=now, st_atime=now)
        raise OSError(2, "no such file")

    def readdir(self, path, fh):
        return [".", "..", "hangs.log"]

    def read(self, path, size, offset, fh):
        threading.Event().wait()


FUSE(Hanging(), sys.argv[1], foreground=True, nothreads=False)
