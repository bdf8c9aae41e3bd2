"""A real Lightning fit under the real `overtime run` (OVERTIME_BIN) with `--window auto`
and the checkpoint advice, with no Overtime call in the job: the bridge's phases keep the
window learned from the training steps away from the slow validation and the checkpoint
save, a hang in a training step is found within the learned window, and
CheckpointOnAdvice saves and stops a fit that cannot finish before max-runtime."""

import datetime
import time

from conftest import JOBS, PYTHON, job_env

JOB = JOBS / "lightning_checkpoint_job.py"
BATCHES = 150   # a training epoch: about 3 s of 20 ms batches, reported every 0.2 s
# The budget covers the interpreter's start and torch's import. It is also a floor: no
# window ends the task before start + budget; what is tested here comes after that.
BUDGET = 8

# The phases the bridge says over a 2-epoch fit and its test (test_lightning_phases).
PHASES = [
    "sanity-check",
    "train", "validation", "train", "checkpoint", "train",
    "validation", "train", "checkpoint", "train",
    "teardown", "main",
    "test", "teardown", "main",
]


def at(event):
    return datetime.datetime.strptime(event["time"], "%Y-%m-%dT%H:%M:%S.%fZ")


def seconds_between(first, second):
    return (at(second) - at(first)).total_seconds()


def of_kind(job, kind):
    return [e for e in job.events if e["event"] == kind]


def run_fit(overtime, tmp_path, options, **env):
    return overtime.run(options, [PYTHON, JOB], job_env(time.time() + 600, **env), tmp_path)


def learned_fit(overtime, tmp_path, **env):
    # Each validation step sleeps 1.5 s, longer than the window learned from the training
    # steps (1 s, its minimum).
    return run_fit(overtime, tmp_path, ["--window", "auto", "--budget", "{}s".format(BUDGET), "--grace", "5s"],
                   VALIDATION_SLEEP="1.5", VALIDATION_BATCHES="2", EPOCH_BATCHES=str(BATCHES), **env)


def test_a_learned_window_lets_slow_validation_and_checkpoints_pass(overtime, tmp_path):
    job = learned_fit(overtime, tmp_path, MAX_EPOCHS="2")
    assert job.code == 0 and job.cancel_reason is None and "job done" in job.stdout, job
    learned = [e for e in of_kind(job, "window-learned") if e["phase"] == "train"]
    assert learned, "no window learned for train: {}".format(job.events)
    print("learned for train:", [e["window"] for e in learned])
    phases = of_kind(job, "phase")
    started = of_kind(job, "started")[0]
    # Learned in the first epoch's steps, shorter than a validation step; the second
    # epoch's validation and save came after it and past the budget's floor.
    first_validation = next(e for e in phases if e["name"] == "validation")
    last_validation = [e for e in phases if e["name"] == "validation"][-1]
    assert at(learned[0]) < at(first_validation), (learned[0], first_validation)
    assert learned[0]["window"] < 1.5, learned
    assert seconds_between(started, last_validation) > BUDGET, (started, last_validation)
    # The events file thins phase events as it does every frequent kind (the first 10, then
    # one each 0.1 s): those the fit says within 0.1 s of the last one written are only
    # counted (the `exited` event's `thinned`).
    written = [e["name"] for e in phases]
    thinned = of_kind(job, "exited")[0].get("thinned", {}).get("phase", 0)
    assert written == PHASES[:len(written)] and len(written) >= 10, written
    assert len(written) + thinned == len(PHASES), (written, thinned)


def test_a_hang_in_a_training_step_is_cancelled_within_the_learned_window(overtime, tmp_path):
    job = learned_fit(overtime, tmp_path, MAX_EPOCHS="3", HANG_AT_STEP=str(BATCHES + 50))   # the 51st step of epoch 2
    assert job.code == 124 and job.cancel_reason == "timeout", job
    assert "hanging at step {}".format(BATCHES + 50) in job.stdout, job
    learned = [e for e in of_kind(job, "window-learned") if e["phase"] == "train"]
    cancel = of_kind(job, "cancel")[0]
    last_progress = [e for e in job.events if e["event"] == "progress" and at(e) <= at(cancel)][-1]
    detection = seconds_between(last_progress, cancel)
    print("learned for train: {}; cancelled {:.2f} s after the last progress ({})".format(
        [e["window"] for e in learned], detection, cancel["why"]))
    assert learned and at(learned[0]) < at(cancel), job.events
    assert last_progress["title"] == "Epoch 2/3", last_progress
    started = of_kind(job, "started")[0]
    assert seconds_between(started, last_progress) > BUDGET, "hung before the budget's floor: {}".format(last_progress)
    assert detection < 5, "found by the budget's window ({} s), not the learned one: {:.2f} s".format(BUDGET, detection)


def test_checkpoint_on_advice_saves_and_stops_a_fit_that_cannot_finish(overtime, tmp_path):
    advice_dir = tmp_path / "advised"
    # 1000 epochs of 0.3 s or so: far past max-runtime. The advice is due 8 s before it.
    job = run_fit(overtime, tmp_path, ["--max-runtime", "20s", "--checkpoint-lead", "8s"],
                  ADVICE_DIR=str(advice_dir), MAX_EPOCHS="1000")
    assert job.code == 0 and job.cancel_reason is None and "job done" in job.stdout, job
    started = of_kind(job, "started")[0]
    advice = of_kind(job, "advice")
    assert len(advice) == 1 and advice[0]["do"] == "checkpoint", job.events
    exited = of_kind(job, "exited")[0]
    print("advice {:.2f} s after the start ({}); exited {:.2f} s after it".format(
        seconds_between(started, advice[0]), advice[0]["why"], seconds_between(advice[0], exited)))
    assert 11.9 <= seconds_between(started, advice[0]) < 14, advice
    assert exited["elapsed"] < 20, "stopped on the advice, before max-runtime: {}".format(exited)
    saved = list(advice_dir.iterdir())
    assert len(saved) == 1 and saved[0].name.startswith("overtime-advice-epoch=") and saved[0].stat().st_size > 0, saved
    assert "advice checkpoint {}".format(saved[0]) in job.stdout, job
    epoch = int(job.stdout.split("fit ended at epoch ")[1].split()[0])
    assert epoch < 1000, job.stdout
