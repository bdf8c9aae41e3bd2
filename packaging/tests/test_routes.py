"""Each install route (pip, uv tool, pipx, the tarball, the tarball through a symlink),
installed from dist/ and run where no Swift toolchain, no libuv and no build on PATH
exist: the command, its version, a budget, and a tqdm job in an environment of its own
that reports through the bundled bridge."""

import textwrap

import pytest

from conftest import PYTHON_ROUTES, ROUTES
from hidden import TOOLCHAIN, run_hidden, user_env

# An 8 s loop that reports only through tqdm; the last line says where the bridge came from.
TQDM_JOB = textwrap.dedent("""\
    import sys, time
    from tqdm import tqdm
    for _ in tqdm(range(40)):
        time.sleep(0.2)
    bridge = sys.modules.get("overtime_worker")
    print("bridge:", bridge.__file__ if bridge else None)
    """)


@pytest.fixture(scope="module")
def tqdm_job(tmp_path_factory):
    path = tmp_path_factory.mktemp("job-script") / "loop.py"
    path.write_text(TQDM_JOB)
    return str(path)


def test_the_build_is_hidden(tmp_path):
    """The namespace the routes run in lacks what a build needs: else these tests prove nothing."""
    env = user_env(str(tmp_path))
    listing = run_hidden(["ls", "-A", TOOLCHAIN], env, "hidden namespace", expect=None)
    assert listing.stdout == "", "{} is visible in the hidden namespace: {}".format(TOOLCHAIN, listing.stdout)
    load = run_hidden(["/usr/bin/python3", "-c", "import ctypes; ctypes.CDLL('libuv.so.1')"], env,
                      "hidden namespace: loading libuv", expect=None)
    assert load.returncode != 0, "libuv.so.1 loads in the hidden namespace"
    swift = run_hidden(["sh", "-c", "command -v swift"], env, "hidden namespace: swift on PATH", expect=None)
    assert swift.returncode != 0, "swift is on PATH there: " + swift.stdout


@pytest.mark.parametrize("route", ROUTES, indirect=True)
def test_version_matches_the_wheel(route, version):
    out = run_hidden(["overtime", "version"], route.env, route.name + " route").stdout
    assert out.startswith("overtime {} (commit ".format(version)), \
        "{} route: `overtime version` said {!r}; the wheel's metadata says {}".format(route.name, out, version)


@pytest.mark.parametrize("route", PYTHON_ROUTES, indirect=True)
def test_python_m_runs_the_binary(route, version):
    out = run_hidden([route.python, "-m", "overtime_supervisor", "version"], route.env, route.name + " route").stdout
    assert out.startswith("overtime {} (commit ".format(version)), \
        "{} route: `python -m overtime_supervisor version` said {!r}".format(route.name, out)


@pytest.mark.parametrize("route", ROUTES, indirect=True)
def test_budget_cancels_a_silent_command(route):
    run_hidden(["overtime", "run", "--budget", "1s", "--", "sleep", "5"], route.env, route.name + " route",
               expect=124)


@pytest.mark.parametrize("route", ROUTES, indirect=True)
def test_tqdm_job_reports_through_the_bundled_bridge(route, job_python, tqdm_job):
    """The job's venv has no overtime_worker: its bars reach the supervisor only through the
    copy installed beside the command, so a 3 s budget does not end the 8 s loop."""
    result = run_hidden(["overtime", "run", "--budget", "3s", "--", job_python, tqdm_job], route.env,
                        route.name + " route, bridge on", expect=0)
    assert "/share/overtime/python/lib/overtime_worker/" in result.stdout, \
        "{} route: the job's bridge did not come from the bundle: {}".format(route.name, result.stdout)


@pytest.mark.parametrize("route", ROUTES, indirect=True)
def test_tqdm_job_without_the_bridge_times_out(route, job_python, tqdm_job):
    run_hidden(["overtime", "run", "--budget", "3s", "--python-bridge", "off", "--", job_python, tqdm_job],
               route.env, route.name + " route, --python-bridge off", expect=124)

