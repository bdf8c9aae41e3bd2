"""deploy/ is not fiction.

- The Slurm script, run by bash outside Slurm with Slurm's variables faked, is overtime
  itself once it has started (`exec`); the SIGTERM Slurm would send (--signal=B:TERM@120)
  becomes a `shutdown` cancel that train.py hears and checkpoints on, within the grace the
  script's --shutdown-grace allows, and overtime exits 143. Run again with the same run
  directory (a requeued job), it resumes and train.py continues from its checkpoint.
- The same script submitted to a real Slurm (the cluster of SLURM_CONF: scripts/test
  brings one up with scripts/slurm) runs as written, and `scancel --batch --signal=TERM`
  ends it as deploy.md says: a `shutdown` train checkpoints on, the job FAILED with 143.
- The Kubernetes Job's numbers fit: OVERTIME_SHUTDOWN_GRACE < terminationGracePeriodSeconds,
  the batch's deadline (plus its longest grace) < activeDeadlineSeconds; and the batch the
  Job runs, with the Job's environment and overtime as PID 1 of its own PID namespace,
  stops on SIGTERM the same way.

Run by scripts/test; alone: OVERTIME_BIN=/path/to/overtime .venv/bin/python -m pytest deploy/test_deploy.py -q -p no:cacheprovider
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml  # PyYAML: scripts/setup installs it into .venv

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
SBATCH = DEPLOY / "slurm" / "train.sbatch"
JOB_YAML = DEPLOY / "kubernetes" / "job.yaml"
JOB_FILE = DEPLOY / "job.json"
DOCKERFILE = DEPLOY / "Dockerfile"

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(text):
    """A duration as Overtime writes them (250ms, 30s, 1.5s, 5m, 1h30m, a bare number)."""
    if isinstance(text, (int, float)):
        return float(text)
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text)
    assert parts and "".join(n + u for n, u in parts) == text, "not a duration: {!r}".format(text)
    return sum(float(n) * UNITS[u] for n, u in parts)


def clipped_grace(task_grace, shutdown_grace):
    """The grace a task gets on SIGTERM (Supervisor.grace(within:)): SIGKILL a second
    before the orchestrator's (half the shutdown grace when that is under 2 s)."""
    return min(task_grace, shutdown_grace - min(1.0, shutdown_grace / 2))


def job_file():
    return json.loads(JOB_FILE.read_text())


def task_graces(job):
    default = seconds(job.get("defaults", {}).get("grace", "10s"))
    return {t["name"]: seconds(t.get("grace", default)) for t in job["tasks"]}


def sbatch_settings():
    text = SBATCH.read_text()
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", text, re.M))
    default_grace = re.search(r"^shutdown_grace=\$\{OVERTIME_SHUTDOWN_GRACE:-(\S+)\}$", text, re.M).group(1)
    return text, directives, default_grace


@pytest.fixture(scope="session")
def overtime_bin():
    binary = os.environ.get("OVERTIME_BIN")
    if not binary:
        pytest.skip("OVERTIME_BIN is not set: point it at a built overtime binary")
    if not os.access(binary, os.X_OK):
        pytest.fail("OVERTIME_BIN={} is not an executable file".format(binary))
    return binary


def task_env(**extra):
    """This environment without anything of an Overtime the suite may run under, with this
    interpreter's directory first on PATH (the job runs `python3`, which needs numpy)."""
    pytest.importorskip("numpy", reason="the example job (train.py) needs numpy")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OVERTIME_", "_OVERTIME_", "SLURM_")) and k != "CHECKPOINT_DIR"}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "/usr/bin:/bin")])
    assert shutil.which("python3", path=env["PATH"]), "no python3 on PATH"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def events(run_dir):
    path = Path(run_dir) / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_until(predicate, timeout, what, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError("exited {} before {}".format(proc.returncode, what))
        time.sleep(0.05)
    raise AssertionError("not within {} s: {}".format(timeout, what))


def training_in_run(run_dir):
    """True once train has reported progress in the run directory."""
    return any(e["event"] == "progress" and e.get("task") == "train" for e in events(run_dir))


def stop_and_wait(proc, pid, timeout=30):
    os.kill(pid, signal.SIGTERM)
    return proc.wait(timeout=timeout)


@pytest.fixture
def reaper():
    """Processes started by a test; whatever still runs when it ends (a failed assertion)
    is killed with its process group, so nothing outlives the test."""
    started = []
    yield started
    for proc in started:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


class Script(object):
    """deploy/slurm/train.sbatch run by bash, its output in files."""

    def __init__(self, tmp_path, env, name, reaper):
        self.out = tmp_path / (name + ".out")
        self.err = tmp_path / (name + ".err")
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(["bash", str(SBATCH)], env=env, stdout=out, stderr=err, cwd=str(tmp_path),
                                         start_new_session=True)
        reaper.append(self.proc)

    def output(self):
        return "--- stdout\n{}--- stderr\n{}".format(self.out.read_text(), self.err.read_text())


# --- Slurm ------------------------------------------------------------------------------

def test_sbatch_numbers_fit():
    text, directives, default_grace = sbatch_settings()
    assert directives["signal"].startswith("B:TERM@"), "the SIGTERM must go to the batch shell (B:), which is overtime"
    signal_time = int(directives["signal"].split("@")[1])
    h, m, s = (int(x) for x in directives["time"].split(":"))
    time_limit = h * 3600 + m * 60 + s
    shutdown_grace = seconds(default_grace)
    # Every SIGKILL Overtime may send after the signal lands before the time limit.
    assert shutdown_grace < signal_time
    # The batch ends by its own deadline before the signal can come (up to 60 s early).
    job = job_file()
    assert seconds(job["deadline"]) + max(task_graces(job).values()) <= time_limit - signal_time - 60
    # The script hands over to overtime: nothing of bash is left to catch the signal.
    assert re.search(r'^exec "\$overtime" batch "\$job_file"', text, re.M)


def test_slurm_sigterm_is_a_shutdown_the_task_checkpoints_on(overtime_bin, tmp_path, reaper):
    _, _, default_grace = sbatch_settings()
    train_grace = task_graces(job_file())["train"]
    run_dir = tmp_path / "run"
    env = task_env(OVERTIME_BIN=overtime_bin, OVERTIME_RUN_DIR=str(run_dir),
                   SLURM_JOB_ID="4242", SLURM_JOB_NAME="overtime-train", SLURM_SUBMIT_DIR=str(REPO))

    # The first run: SIGTERM while train is training, as Slurm's --signal=B:TERM@120.
    first = Script(tmp_path, env, "first", reaper)
    wait_until(lambda: training_in_run(run_dir), 20, "train reports progress", first.proc)
    with open("/proc/{}/comm".format(first.proc.pid)) as comm:
        assert comm.read().strip() == "overtime", "the batch shell should have become overtime (exec)"
    code = stop_and_wait(first.proc, first.proc.pid)
    assert code == 143, first.output()

    journal = events(run_dir)
    cancels = [e for e in journal if e["event"] == "cancel" and e["task"] == "train"]
    assert [c["reason"] for c in cancels] == ["shutdown"], journal
    assert cancels[0]["grace"] == pytest.approx(clipped_grace(train_grace, seconds(default_grace)))
    exited = [e for e in journal if e["event"] == "exited" and e["task"] == "train"][-1]
    assert exited["cancel_reason"] == "shutdown" and not exited["killed"], exited
    checkpoint = run_dir / "checkpoints" / "train.npz"
    assert checkpoint.is_file(), "train.py wrote no checkpoint\n" + first.output()
    log = (run_dir / "logs" / "train.log").read_text()
    assert "checkpoint (cancelled: shutdown)" in log, log
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "shutdown" and not summary["succeeded"], summary
    assert "job 4242" in first.err.read_text()

    # Requeued (same job id, same run directory): resumed, train.py continues from its
    # checkpoint. A short shutdown grace from the environment is honoured: 3 s -> 2 s.
    env["OVERTIME_SHUTDOWN_GRACE"] = "3s"
    second = Script(tmp_path, env, "second", reaper)
    wait_until(lambda: "resuming from" in (run_dir / "logs" / "train.log").read_text()
               and len({e["run"] for e in events(run_dir) if e["event"] == "progress"}) == 2,
               20, "the resumed train reports progress", second.proc)
    code = stop_and_wait(second.proc, second.proc.pid)
    assert code == 143, second.output()
    cancels = [e for e in events(run_dir) if e["event"] == "cancel" and e["task"] == "train"]
    assert [c["reason"] for c in cancels] == ["shutdown", "shutdown"]
    assert cancels[1]["grace"] == pytest.approx(clipped_grace(train_grace, 3.0)) == 2
    log = (run_dir / "logs" / "train.log").read_text()
    assert log.count("checkpoint (cancelled: shutdown)") == 2, log


def slurm_conf():
    """The SLURM_CONF of the cluster scripts/test brought up (scripts/slurm); the test fails
    with the reason when it could not come up, and is skipped only when neither is set
    (pytest run by hand, no cluster asked for)."""
    failed = os.environ.get("CLI_SLURM_UP_FAILED")
    if failed:
        pytest.fail("no Slurm cluster for this test: " + failed)
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        pytest.skip('SLURM_CONF is not set: eval "$(sudo scripts/slurm up)" first (scripts/test does)')
    return conf


def slurm(env, *argv):
    done = subprocess.run(list(argv), env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=30)
    assert done.returncode == 0, "{}: {}{}".format(" ".join(argv), done.stdout, done.stderr)
    return done.stdout


def slurm_job(env, job):
    """`scontrol show job -o`: its Key=Value fields."""
    fields = {}
    for field in slurm(env, "scontrol", "show", "job", "-o", job).split():
        key, _, value = field.partition("=")
        fields.setdefault(key, value)
    return fields


FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "DEADLINE"}


def test_sbatch_train_under_slurm_scancel_batch_term_is_a_shutdown(overtime_bin, tmp_path):
    """train.sbatch submitted to a real Slurm, and stopped early the way deploy.md says
    (`scancel --batch --signal=TERM`, the path of its --signal=B:TERM@120)."""
    env = task_env(SLURM_CONF=slurm_conf())
    run_dir = tmp_path / "run"
    out = tmp_path / "job.out"
    cpus = subprocess.check_output(["nproc"], universal_newlines=True).strip()
    # As written, but: -c overrides its 4 CPUs, which a smaller node never has (the job
    # would pend for ever; docs/engines-locally.md), and the output file and run
    # directory go to the test's directory, not the checkout's. Submitted from the top of
    # the checkout, as the script asks (SLURM_SUBMIT_DIR finds deploy/job.json).
    job = slurm(env, "sbatch", "--parsable", "-c", cpus, "-o", str(out),
                "--export=ALL,OVERTIME_BIN={},OVERTIME_RUN_DIR={}".format(overtime_bin, run_dir),
                str(SBATCH)).strip().split(";")[0]
    try:
        wait_until(lambda: training_in_run(run_dir), 60, "train reports progress in job " + job)
        running = slurm_job(env, job)
        assert running["JobState"] == "RUNNING" and running["JobName"] == "overtime-train", running
        assert running["TimeLimit"] == "01:00:00", running
        slurm(env, "scancel", "--batch", "--signal=TERM", job)
        # train's grace is 45 s; it checkpoints and exits in well under a second.
        finished = wait_until(lambda: (lambda f: f if f["JobState"] in FINISHED else None)(slurm_job(env, job)),
                              60, "job {} finished".format(job))
        output = out.read_text() if out.exists() else "(no output file)"
        assert finished["JobState"] == "FAILED" and finished["ExitCode"] == "143:0", (finished, output)
        cancels = [e for e in events(run_dir) if e["event"] == "cancel" and e["task"] == "train"]
        assert [c["reason"] for c in cancels] == ["shutdown"], output
        exited = [e for e in events(run_dir) if e["event"] == "exited" and e["task"] == "train"][-1]
        assert exited["cancel_reason"] == "shutdown" and not exited["killed"], exited
        assert (run_dir / "checkpoints" / "train.npz").is_file(), output
        assert "checkpoint (cancelled: shutdown)" in (run_dir / "logs" / "train.log").read_text()
        assert "overtime-train: job {} on".format(job) in output, output
    finally:
        subprocess.run(["scancel", job], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)


# --- Kubernetes -------------------------------------------------------------------------

def kubernetes_job():
    job = yaml.safe_load(JOB_YAML.read_text())
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return job, pod, container, env


def test_kubernetes_numbers_fit():
    job, pod, container, env = kubernetes_job()
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    active_deadline = job["spec"]["activeDeadlineSeconds"]
    termination_grace = pod["terminationGracePeriodSeconds"]
    shutdown_grace = seconds(env["OVERTIME_SHUTDOWN_GRACE"])

    # The Job runs the image's job file, which is deploy/job.json.
    assert container["args"][:2] == ["batch", "/opt/overtime/deploy/job.json"]
    dockerfile = DOCKERFILE.read_text()
    assert "COPY deploy/job.json /opt/overtime/deploy/job.json" in dockerfile
    assert 'ENTRYPOINT ["/usr/local/bin/overtime"]' in dockerfile
    user = re.search(r"^USER (\d+)", dockerfile, re.M).group(1)
    assert pod["securityContext"]["runAsUser"] == int(user)
    # Overtime is copied from the release image of this checkout's version, not built.
    version = (REPO / "VERSION").read_text().strip()
    assert re.search(r"^ARG OVERTIME_IMAGE=localhost/overtime:{}$".format(re.escape(version)), dockerfile, re.M), \
        "deploy/Dockerfile's OVERTIME_IMAGE must name the image scripts/package writes: localhost/overtime:" + version
    assert "COPY --from=overtime /usr/local/bin/overtime /usr/local/bin/" in dockerfile
    assert "swift build" not in dockerfile

    batch = job_file()
    deadline = seconds(batch["deadline"])
    longest_grace = max(task_graces(batch).values())
    # Overtime's SIGKILLs come before the kubelet's.
    assert shutdown_grace < termination_grace
    # The batch ends by its own deadline, tasks' graces included, before the Job's.
    assert deadline < active_deadline
    assert deadline + longest_grace < active_deadline
    # No task loses grace to the shutdown clip (each fits in shutdown grace - 1 s).
    assert longest_grace <= clipped_grace(longest_grace, shutdown_grace)


def in_new_pid_namespace():
    """`unshare --pid --fork --mount-proc` when this machine allows it (root, util-linux)."""
    if not shutil.which("unshare"):
        return []
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return ["unshare", "--pid", "--fork", "--mount-proc"] if probe.returncode == 0 else []


def test_kubernetes_sigterm_to_pid_1_is_a_shutdown_within_the_grace(overtime_bin, tmp_path, reaper):
    _, _, _, pod_env = kubernetes_job()
    run_dir = tmp_path / "run"
    env = task_env(OVERTIME_SHUTDOWN_GRACE=pod_env["OVERTIME_SHUTDOWN_GRACE"],
                   CHECKPOINT_DIR=str(tmp_path / "checkpoints"))
    wrapper = in_new_pid_namespace()
    argv = wrapper + [overtime_bin, "batch", str(JOB_FILE), "--run-dir", str(run_dir)]
    with open(tmp_path / "err", "w") as err:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    reaper.append(proc)
    pid = proc.pid
    if wrapper:   # signal overtime, the child unshare forked, as the kubelet signals PID 1
        children = "/proc/{0}/task/{0}/children".format(proc.pid)
        pid = int(wait_until(lambda: open(children).read().split(), 10, "unshare's child", proc)[0])
        with open("/proc/{}/status".format(pid)) as status:
            nspid = [line.split()[1:] for line in status if line.startswith("NSpid:")][0]
        assert nspid[-1] == "1", "overtime should be PID 1 in its namespace: {}".format(nspid)
    wait_until(lambda: training_in_run(run_dir), 20, "train reports progress", proc)
    code = stop_and_wait(proc, pid)
    assert code == 143, (tmp_path / "err").read_text()

    cancel = [e for e in events(run_dir) if e["event"] == "cancel"]
    assert [(c["task"], c["reason"]) for c in cancel] == [("train", "shutdown")]
    expected = clipped_grace(task_graces(job_file())["train"], seconds(pod_env["OVERTIME_SHUTDOWN_GRACE"]))
    assert cancel[0]["grace"] == pytest.approx(expected)
    assert (tmp_path / "checkpoints" / "train.npz").is_file()
    assert "checkpoint (cancelled: shutdown)" in (run_dir / "logs" / "train.log").read_text()
