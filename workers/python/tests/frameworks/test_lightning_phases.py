"""Lightning's phases and CheckpointOnAdvice, with no Overtime call in the job: the job runs
in the frameworks' venv with one end of a socketpair as fd 3, and this test holds the other
end as the supervisor would (the supervisor's own handling of phases and advice is tested on
its side)."""

import json
import socket
import subprocess
import threading
import time

from conftest import JOBS, PYTHON, job_env

JOB = JOBS / "lightning_checkpoint_job.py"


class Supervised(object):
    """The job under a fake supervisor: its lines as they come, and a way to answer."""

    def __init__(self, tmp_path, **env):
        self.sock, theirs = socket.socketpair()
        self.lines = []
        self.child = subprocess.Popen([PYTHON, str(JOB)], pass_fds=(theirs.fileno(),), cwd=str(tmp_path),
                                      env=job_env(time.time() + 600, OVERTIME_FD=str(theirs.fileno()), **env),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        theirs.close()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        pending = b""
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\n")
            self.lines.extend(json.loads(line) for line in lines)

    def wait_for(self, predicate, timeout=60):
        deadline = time.monotonic() + timeout
        while not any(predicate(m) for m in list(self.lines)):
            if time.monotonic() > deadline or self.child.poll() is not None:
                self.child.kill()
                raise AssertionError("not seen: {}\n{}".format(self.lines[-5:], self.finish()[1][-2000:]))
            time.sleep(0.05)

    def finish(self, timeout=120):
        out, err = self.child.communicate(timeout=timeout)
        self._reader.join(10)
        self.sock.close()
        return out, err

    def phases(self):
        return [m["name"] for m in self.lines if m["type"] == "phase"]


def test_a_fit_says_its_phases_in_order(tmp_path):
    job = Supervised(tmp_path)
    out, err = job.finish()
    assert job.child.returncode == 0 and "job done" in out, err[-2000:]
    assert job.phases() == [
        "sanity-check",
        "train", "validation", "train", "checkpoint", "train",      # epoch 1: ModelCheckpoint saves after validation
        "validation", "train", "checkpoint", "train",               # epoch 2
        "teardown", "main",                                         # fit returned: the phase before it
        "test", "teardown", "main",
    ]
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["epoch=1-step=20.ckpt"]


def test_without_the_bridge_no_phase_is_said(tmp_path):
    job = Supervised(tmp_path, OVERTIME_LIGHTNING="0")
    out, err = job.finish()
    assert job.child.returncode == 0 and "job done" in out, err[-2000:]
    assert job.phases() == []


def test_checkpoint_on_advice_saves_and_stops_the_fit(tmp_path):
    advice_dir = tmp_path / "advised"
    job = Supervised(tmp_path, ADVICE_DIR=str(advice_dir), MAX_EPOCHS="1000")
    # Advised in the second epoch's training, after the first epoch's checkpoint.
    job.wait_for(lambda m: m.get("name") == "checkpoint")
    job.wait_for(lambda m: m.get("bar", "").startswith("lightning-train") and m.get("title", "").startswith("Epoch 2/"))
    job.sock.sendall(b'{"type":"advice","do":"rebalance"}\n')   # not for this library: ignored
    time.sleep(0.5)
    assert job.child.poll() is None and not advice_dir.exists()
    job.sock.sendall(json.dumps({"type": "advice", "do": "checkpoint", "remaining": 30,
                                 "why": "max-runtime ends in 30s"}).encode() + b"\n")
    out, err = job.finish()
    assert job.child.returncode == 0 and "job done" in out, err[-2000:]
    saved = list(advice_dir.iterdir())
    assert len(saved) == 1 and saved[0].name.startswith("overtime-advice-epoch=") and saved[0].stat().st_size > 0
    advised_epoch = int(saved[0].name.split("=")[1].split("-")[0])
    assert "advice checkpoint {}".format(saved[0]) in out
    assert "Overtime advised a checkpoint (max-runtime ends in 30s): saved {}".format(saved[0]) in err
    epoch = int(out.split("fit ended at epoch ")[1].split()[0])
    assert epoch <= advised_epoch + 1, "the fit stopped at the advice, not at max_epochs: {}".format(out)
    phases = job.phases()
    assert phases.count("checkpoint") >= 2 and phases[-3:] == ["test", "teardown", "main"], phases
