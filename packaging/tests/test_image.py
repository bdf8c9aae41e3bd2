"""The image route: dist/'s docker-archive loaded into podman (runc, as scripts/containers
sets it up), run as an entrypoint, and copied from (its /usr/local/: the binary and the
bundled bridge) in a two-stage build into a root file system holding nothing but a static
busybox, where the copied binary runs tasks."""

import os
import shlex
import shutil

import pytest

from conftest import dist_file
from hidden import ROOT, run_checked

# One worker for these (pytest -n with --dist loadgroup): podman set up and the image loaded once.
pytestmark = pytest.mark.xdist_group("podman")

CONTAINERS = os.path.join(ROOT, "scripts", "containers")
COPY_TAG = "localhost/overtime-copy-from-test"
BUSYBOX = "/bin/busybox"


@pytest.fixture(scope="module")
def podman_env():
    """The environment podman works in here (scripts/containers up: podman, runc, limits)."""
    run_checked([CONTAINERS, "up"], "scripts/containers up")
    exports = run_checked([CONTAINERS, "env"], "scripts/containers env").stdout
    env = dict(os.environ)
    for line in exports.splitlines():
        words = shlex.split(line)
        if words[:1] == ["export"] and "=" in words[1]:
            key, value = words[1].split("=", 1)
            env[key] = value
    return env


@pytest.fixture(scope="module")
def image(podman_env, version):
    archive = dist_file("overtime-*-image.tar")
    loaded = run_checked(["podman", "load", "-i", archive], "podman load -i " + archive, env=podman_env)
    name = "localhost/overtime:" + version
    assert name in loaded.stdout + loaded.stderr, "podman load did not name {}: {}".format(name, loaded.stdout)
    return name


def test_podman_run_prints_the_version(podman_env, image, version):
    out = run_checked(["podman", "run", "--rm", image, "version"], "podman run " + image, env=podman_env).stdout
    assert out.startswith("overtime {} (commit ".format(version)), "podman run {} version said {!r}".format(image, out)


def busybox_root(context):
    """A root file system of a static busybox and its applets, nothing else (no libc)."""
    assert os.path.isfile(BUSYBOX), "no {} (apt-get install busybox-static; scripts/setup --tests)".format(BUSYBOX)
    root = os.path.join(context, "rootfs")
    for directory in ("bin", "tmp", "usr/local/bin"):
        os.makedirs(os.path.join(root, directory))
    shutil.copy2(BUSYBOX, os.path.join(root, "bin", "busybox"))
    for applet in ("sh", "sleep", "echo"):
        os.symlink("busybox", os.path.join(root, "bin", applet))


def test_copy_from_into_a_busybox_root_runs_tasks(podman_env, image, version, tmp_path):
    context = str(tmp_path)
    busybox_root(context)
    with open(os.path.join(context, "Containerfile"), "w") as f:
        f.write("FROM {} AS overtime\n"
                "FROM scratch\n"
                "COPY rootfs/ /\n"
                "COPY --from=overtime /usr/local/ /usr/local/\n"
                "ENV PATH=/usr/local/bin:/bin\n".format(image))
    tag = "{}:{}".format(COPY_TAG, version)
    run_checked(["podman", "build", "--pull=never", "-t", tag, context], "podman build of the COPY --from image",
                env=podman_env)
    try:
        run_checked(["podman", "run", "--rm", tag, "overtime", "run", "--budget", "1s", "--", "sleep", "5"],
                    "the copied overtime in busybox, a silent task", expect=124, env=podman_env)
        # The bridge came along with /usr/local/ (the task finds it where the binary does).
        bundle = "/usr/local/share/overtime/python/sitecustomize.py"
        ran = run_checked(["podman", "run", "--rm", tag, "overtime", "run", "--", "sh", "-c",
                           "test -f {} && echo ran in busybox".format(bundle)],
                          "the copied overtime in busybox, a task that exits 0", env=podman_env)
        assert "ran in busybox" in ran.stdout, "the task's output is missing: " + ran.stdout
    finally:
        run_checked(["podman", "rmi", "--force", tag], "podman rmi " + tag, expect=None, env=podman_env)
