"""The platform wheel ``overtime-supervisor``: the static binary as a script (pip copies it
into the environment's ``bin/`` as it is), the bundled bridge as data (into
``share/overtime/python`` under the environment's prefix, beside ``bin/``), and the small
``overtime_supervisor`` package. Written with zipfile, as maturin writes the wheels of
uv and ruff: a static binary needs no build backend.

The distribution name is not ``overtime``: that name on PyPI belongs to an unrelated
temporal-networks library."""

import base64
import hashlib
import os

from archives import EXECUTABLE, Entry, file_entries, write_zip

DISTRIBUTION = "overtime-supervisor"
# A fully static binary runs on any x86-64 Linux, glibc or musl: one wheel carries the
# oldest tags of both, and pip or uv on either takes it with any Python 3.
PLATFORM_TAGS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64")
SUMMARY = ("Run jobs under a time budget that their progress extends: the overtime "
           "supervisor (a static Linux binary) and its bundled Python bridge")
HERE = os.path.dirname(os.path.abspath(__file__))


def wheel_name(version):
    return "{}-{}-py3-none-{}.whl".format(DISTRIBUTION.replace("-", "_"), version, ".".join(PLATFORM_TAGS))


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def metadata(version, readme_intro):
    lines = [
        "Metadata-Version: 2.4",
        "Name: " + DISTRIBUTION,
        "Version: " + version,
        "Summary: " + SUMMARY,
        "License-Expression: Apache-2.0",
        "License-File: LICENSE",
        "Requires-Python: >=3.8",
        # The worker library (import overtime_worker) of the same version comes along.
        "Requires-Dist: overtime-worker=={}".format(version),
        "Classifier: Environment :: Console",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Topic :: System :: Monitoring",
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + readme_intro


def wheel_metadata():
    lines = ["Wheel-Version: 1.0", "Generator: overtime scripts/package", "Root-Is-Purelib: false"]
    lines += ["Tag: py3-none-" + tag for tag in PLATFORM_TAGS]
    return "\n".join(lines) + "\n"


def write_platform_wheel(out_dir, version, binary, bundle, license_text, readme_intro, epoch):
    """Writes the wheel into out_dir and returns its path.

    - Parameters:
      - binary: the static binary's bytes.
      - bundle: entries of the bundled bridge, relative to ``share/overtime/python``.
    """
    stem = "{}-{}".format(DISTRIBUTION.replace("-", "_"), version)
    data_dir = stem + ".data"
    dist_info = stem + ".dist-info"
    entries = file_entries(os.path.join(HERE, "overtime_supervisor"), "overtime_supervisor")
    entries.append(Entry(data_dir + "/scripts/overtime", binary, EXECUTABLE))
    entries += [Entry(data_dir + "/data/share/overtime/python/" + item.path, item.data, item.mode)
                for item in bundle]
    entries = sorted(entries, key=lambda entry: entry.path)
    entries += [
        Entry(dist_info + "/METADATA", metadata(version, readme_intro).encode("utf-8")),
        Entry(dist_info + "/WHEEL", wheel_metadata().encode("utf-8")),
        Entry(dist_info + "/licenses/LICENSE", license_text),
    ]
    record = "".join("{},{},{}\n".format(entry.path, record_hash(entry.data), len(entry.data))
                     for entry in entries)
    record += dist_info + "/RECORD,,\n"
    entries.append(Entry(dist_info + "/RECORD", record.encode("utf-8")))
    path = os.path.join(out_dir, wheel_name(version))
    write_zip(path, entries, epoch)
    return path
