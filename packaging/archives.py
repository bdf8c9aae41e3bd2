"""Files held in memory, and the archives scripts/package writes from them (zip for the
wheel, tar for the tarball and the image's layer), made the same from the same inputs:
entries sorted, owners 0, every time stamp SOURCE_DATE_EPOCH."""

import gzip
import hashlib
import io
import os
import stat
import tarfile
import time
import zipfile
from dataclasses import dataclass

EXECUTABLE = 0o755
REGULAR = 0o644


@dataclass(frozen=True)
class Entry:
    """One file of an archive: where it goes, its bytes, its permission bits."""

    path: str
    data: bytes
    mode: int = REGULAR


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def file_entries(source_dir, prefix):
    """Every file under source_dir (no __pycache__), under prefix, keeping the executable bit."""
    entries = []
    for directory, subdirs, files in os.walk(source_dir):
        subdirs[:] = [name for name in subdirs if name != "__pycache__"]
        for name in files:
            if name.endswith(".pyc"):
                continue
            full = os.path.join(directory, name)
            relative = os.path.relpath(full, source_dir).replace(os.sep, "/")
            entries.append(file_entry(full, prefix + "/" + relative))
    return entries


def file_entry(source, path):
    with open(source, "rb") as f:
        data = f.read()
    mode = EXECUTABLE if os.stat(source).st_mode & stat.S_IXUSR else REGULAR
    return Entry(path, data, mode)


def zip_entries(wheel_path, prefix):
    """The files of a zip (a wheel) as entries under prefix."""
    entries = []
    with zipfile.ZipFile(wheel_path) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            mode = (info.external_attr >> 16) & 0o777
            executable = mode & stat.S_IXUSR
            entries.append(Entry(prefix + "/" + info.filename, archive.read(info),
                                 EXECUTABLE if executable else REGULAR))
    return entries


def zip_time(epoch):
    """A zip's local time stamp for epoch; zip cannot say anything before 1980."""
    return time.gmtime(max(epoch, 315532800))[:6]


def write_zip(path, entries, epoch):
    """A zip of entries in the order given (a wheel wants its RECORD last)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for entry in entries:
            info = zipfile.ZipInfo(entry.path, date_time=zip_time(epoch))
            info.external_attr = (stat.S_IFREG | entry.mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, entry.data)


def tar_bytes(entries, epoch):
    """An uncompressed tar of entries, with an entry for every directory they sit in
    (an image layer without them leaves those directories to the engine's whims)."""
    directories = set()
    for entry in entries:
        parts = entry.path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directories.add("/".join(parts[:depth]))
    members = [(name, None) for name in directories] + [(entry.path, entry) for entry in entries]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name, entry in sorted(members, key=lambda member: member[0]):
            info = tarfile.TarInfo(name)
            info.mtime = epoch
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if entry is None:
                info.type = tarfile.DIRTYPE
                info.mode = EXECUTABLE
                archive.addfile(info)
            else:
                info.mode = entry.mode
                info.size = len(entry.data)
                archive.addfile(info, io.BytesIO(entry.data))
    return buffer.getvalue()


def write_tar_gz(path, entries, epoch):
    # mtime and an empty name in the gzip header: the same bytes on every run.
    with open(path, "wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=epoch, compresslevel=9) as gz:
        gz.write(tar_bytes(entries, epoch))
