"""Fixtures of the install routes' tests: the artifacts scripts/package wrote (dist/, or
OVERTIME_DIST), a job's own venv holding only tqdm, and each route installed from dist/
where the build cannot be seen (hidden.py)."""

import glob
import os
import subprocess
import sys
import zipfile
from collections import namedtuple

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hidden import DIST, VENV_BIN, run_checked, run_hidden, user_env  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"
# How each route is installed, and whether it comes with a Python (python -m overtime_supervisor).
ROUTES = ("pip", "uv-tool", "pipx", "tarball", "tarball-symlink")
PYTHON_ROUTES = ("pip", "uv-tool", "pipx")

# env: what a user who installed this way has (PATH, HOME); python: the environment's
# Python that holds overtime_supervisor, or None.
Installed = namedtuple("Installed", "name env python")


def dist_file(pattern):
    matches = sorted(glob.glob(os.path.join(DIST, pattern)))
    assert len(matches) == 1, "{}: expected one {} (run scripts/package), found {}".format(DIST, pattern, matches)
    return matches[0]


@pytest.fixture(scope="session")
def version():
    """The platform wheel's Version, which everything else must say."""
    wheel = dist_file("overtime_supervisor-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        for line in archive.read(name).decode("utf-8").splitlines():
            if line.startswith("Version: "):
                return line.split(": ", 1)[1]
    raise AssertionError("{}: no Version in its METADATA".format(wheel))


@pytest.fixture(scope="session")
def job_python(tmp_path_factory):
    """A job's own environment: a fresh venv with tqdm and nothing of Overtime's."""
    venv = str(tmp_path_factory.mktemp("job") / "venv")
    run_checked([SYSTEM_PYTHON, "-m", "venv", venv], "making the job's venv")
    python = os.path.join(venv, "bin", "python")
    run_checked([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "tqdm"],
                "installing tqdm into the job's venv")
    probe = subprocess.run([python, "-c", "import overtime_worker"], capture_output=True, text=True)
    assert probe.returncode != 0, "the job's venv {} must not hold overtime_worker".format(venv)
    return python


def install_pip(base, env):
    venv = os.path.join(base, "venv")
    run_hidden([SYSTEM_PYTHON, "-m", "venv", venv], env, "pip route: python3 -m venv")
    run_hidden([os.path.join(venv, "bin", "pip"), "install", "--disable-pip-version-check", "--no-index",
                "--find-links", DIST, "overtime-supervisor"], env, "pip route: pip install")
    return os.path.join(venv, "bin"), os.path.join(venv, "bin", "python"), {}


def install_uv_tool(base, env):
    settings = {"UV_TOOL_DIR": os.path.join(base, "tools"), "UV_TOOL_BIN_DIR": os.path.join(base, "bin"),
                "UV_PYTHON_DOWNLOADS": "never"}
    run_hidden([os.path.join(VENV_BIN, "uv"), "tool", "install", "--no-index", "--find-links", DIST,
                "--python", SYSTEM_PYTHON, "overtime-supervisor"], dict(env, **settings), "uv route: uv tool install")
    python = os.path.join(settings["UV_TOOL_DIR"], "overtime-supervisor", "bin", "python")
    return settings["UV_TOOL_BIN_DIR"], python, settings


@pytest.fixture(scope="session")
def pipx_shared_libs(tmp_path_factory):
    """pipx's shared pip, made once with the index reachable, as on a machine where pipx
    has run before: pipx upgrades it from an index first, which --no-index would forbid."""
    shared = str(tmp_path_factory.mktemp("pipx-shared"))
    scratch = str(tmp_path_factory.mktemp("pipx-scratch"))
    env = user_env(scratch, extra={"PIPX_SHARED_LIBS": shared, "PIPX_HOME": os.path.join(scratch, "pipx"),
                                   "PIPX_BIN_DIR": os.path.join(scratch, "bin")})
    run_checked([os.path.join(VENV_BIN, "pipx"), "install", "--backend", "pip", "--python", SYSTEM_PYTHON,
                 "--pip-args=--find-links " + DIST, "overtime-supervisor"], "making pipx's shared libraries", env=env)
    return shared


def install_pipx(base, env, pipx_shared_libs):
    """pipx with its pip backend (the uv route covers uv's installer)."""
    settings = {"PIPX_HOME": os.path.join(base, "pipx"), "PIPX_BIN_DIR": os.path.join(base, "bin"),
                "PIPX_MAN_DIR": os.path.join(base, "man"), "PIPX_SHARED_LIBS": pipx_shared_libs}
    run_hidden([os.path.join(VENV_BIN, "pipx"), "install", "--backend", "pip", "--python", SYSTEM_PYTHON,
                "--pip-args=--no-index --find-links " + DIST, "overtime-supervisor"],
               dict(env, **settings), "pipx route: pipx install")
    python = os.path.join(settings["PIPX_HOME"], "venvs", "overtime-supervisor", "bin", "python")
    return settings["PIPX_BIN_DIR"], python, settings


def install_tarball(base, env):
    run_hidden(["sha256sum", "-c", "SHA256SUMS"], env, "tarball route: sha256sum -c in " + DIST, cwd=DIST)
    run_hidden(["tar", "-xzf", dist_file("overtime-*-linux-x86_64.tar.gz"), "-C", base], env,
               "tarball route: tar -xzf")
    (top,) = glob.glob(os.path.join(base, "overtime-*-linux-x86_64"))
    return os.path.join(top, "bin"), None, {}


def install_tarball_symlink(base, env):
    """The tarball unpacked in one place, the command linked from another (~/.local/bin)."""
    bin_dir, _, _ = install_tarball(base, env)
    links = os.path.join(base, "links")
    os.makedirs(links)
    os.symlink(os.path.join(bin_dir, "overtime"), os.path.join(links, "overtime"))
    return links, None, {}


INSTALLERS = {"pip": install_pip, "uv-tool": install_uv_tool, "pipx": install_pipx,
              "tarball": install_tarball, "tarball-symlink": install_tarball_symlink}
# What an installer needs besides its directory and environment: fixtures, by name.
INSTALLER_FIXTURES = {"pipx": ("pipx_shared_libs",)}


@pytest.fixture(scope="module")
def route(request, tmp_path_factory):
    """One route installed from dist/, where the build is hidden."""
    name = request.param
    base = str(tmp_path_factory.mktemp(name))
    home = os.path.join(base, "home")
    os.makedirs(home)
    env = user_env(home)
    extra = [request.getfixturevalue(fixture) for fixture in INSTALLER_FIXTURES.get(name, ())]
    bin_dir, python, settings = INSTALLERS[name](base, env, *extra)
    installed = os.path.join(bin_dir, "overtime")
    assert os.access(installed, os.X_OK), "{} route: no executable {}".format(name, installed)
    return Installed(name, user_env(home, [bin_dir], settings), python)

