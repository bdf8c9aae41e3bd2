"""The ``overtime`` command, installed from the ``overtime-supervisor`` wheel.

The wheel puts the static ``overtime`` binary in the environment's ``bin/`` as it is (no
Python in front of a supervisor's every start) and its bundled Python bridge in
``share/overtime/python`` beside it. This package only finds the binary, for
``python -m overtime_supervisor`` and for programs that want its path::

    from overtime_supervisor import find_overtime_bin
    subprocess.run([find_overtime_bin(), "run", "--budget", "5m", "--", "make"])
"""

import os
import sys
import sysconfig

__all__ = ["find_overtime_bin"]


def _scripts_dirs():
    """Where an installer may have put the wheel's scripts, most likely first."""
    yield sysconfig.get_path("scripts")
    try:
        user_scheme = sysconfig.get_preferred_scheme("user")
    except AttributeError:   # before Python 3.10
        user_scheme = "posix_user"
    try:
        yield sysconfig.get_path("scripts", scheme=user_scheme)
    except KeyError:
        pass
    # pip install --target DIR: the package in DIR, the scripts in DIR/bin.
    yield os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin")
    # A venv's own bin, when this Python is not the one that installed the wheel.
    yield os.path.join(sys.prefix, "bin")


def find_overtime_bin():
    """The path of the ``overtime`` binary this package was installed with.

    - Throws: ``FileNotFoundError`` naming the places looked in, when none holds it.
    """
    looked = []
    for directory in _scripts_dirs():
        if not directory or directory in looked:
            continue
        looked.append(directory)
        candidate = os.path.join(directory, "overtime")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("overtime: the binary is not in " + ", ".join(looked)
                            + " (reinstall overtime-supervisor)")
