"""Running a command where a user without Overtime's build tools would: in a mount
namespace of its own with the Swift toolchain (/opt/swift) under an empty tmpfs and
libuv's and libyaml's shared libraries replaced by /dev/null, with a PATH that holds no
build and a HOME of its own. Every route's install and checks run there."""

import functools
import glob
import os
import shlex
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIST = os.environ.get("OVERTIME_DIST", os.path.join(ROOT, "dist"))
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
TOOLCHAIN = "/opt/swift"


@functools.lru_cache(maxsize=None)
def shared_library_files():
    """The real files behind every libuv.so* and libyaml*.so* in the dynamic loader's directories."""
    found = set()
    for directory in ("/lib", "/usr/lib", "/usr/local/lib", "/lib64", "/usr/lib64"):
        for name in ("libuv.so*", "libyaml*.so*"):
            for path in glob.glob(directory + "/" + name) + glob.glob(directory + "/*/" + name):
                real = os.path.realpath(path)
                if os.path.isfile(real):
                    found.add(real)
    return tuple(sorted(found))


def hiding_script():
    lines = ["set -e"]
    if os.path.isdir(TOOLCHAIN):
        lines.append("mount -t tmpfs -o size=64k,mode=0755 hidden-toolchain " + shlex.quote(TOOLCHAIN))
    for path in shared_library_files():
        lines.append("mount --bind /dev/null " + shlex.quote(path))
    lines.append('exec "$@"')
    return "\n".join(lines)


def user_env(home, path_dirs=(), extra=None):
    """The environment of a user whose PATH holds path_dirs and the system's, nothing of a build."""
    env = {
        "PATH": ":".join(list(path_dirs) + ["/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": home,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
    }
    env.update(extra or {})
    return env


def describe(argv, result, where):
    return "{}: `{}` exited {}\n--- stdout:\n{}\n--- stderr:\n{}".format(
        where, shlex.join(argv), result.returncode, result.stdout, result.stderr)


def run_hidden(argv, env, where, expect=0, cwd=None, timeout=180):
    """Runs argv hidden from the build; fails, saying where and with the output, unless it
    exits with expect (None: any status). Returns the CompletedProcess."""
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", hiding_script(), "hidden"] + list(argv)
    return _run(command, argv, where, expect, env, cwd, timeout)


def run_checked(argv, where, expect=0, env=None, cwd=None, timeout=300):
    """Runs argv as it is (outside the hidden namespace), failing as run_hidden does."""
    return _run(argv, argv, where, expect, env, cwd, timeout)


def _run(command, argv, where, expect, env, cwd, timeout):
    try:
        result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        raise AssertionError("{}: `{}` still running after {} s\n--- stdout:\n{}\n--- stderr:\n{}".format(
            where, shlex.join(argv), timeout, expired.stdout, expired.stderr))
    if expect is not None:
        assert result.returncode == expect, describe(argv, result, where) + "\n(expected exit {})".format(expect)
    return result
