"""Each framework's own progress keeps a healthy job alive under a short window, with no
Overtime call in the job; the same job with that framework's bridge turned off (its
environment variable) is cancelled, so each test fails for the reason it names.

Every job runs until JOB_UNTIL, a few seconds past its first budget. The budget covers the
interpreter's start and the framework's imports (torch alone takes seconds); from the
first report on, each must come within WINDOW."""

import os
import time

import pytest

from conftest import JOBS, PYTHON, job_env

WINDOW = "3s"


def healthy(job, bar, title=None):
    assert job.code == 0 and job.cancel_reason is None, job
    assert "job done" in job.stdout, job
    moved = job.progress(bar)
    assert len({e.get("completed") for e in moved}) > 3, "bar {} moved: {}".format(bar, job)
    if title is not None:
        assert any(str(e.get("title", "")).startswith(title) for e in moved), "title {}: {}".format(title, moved[-3:])
    return moved


def cancelled_for_silence(job, bar):
    assert job.code == 124 and job.cancel_reason == "timeout", job
    assert not job.progress(bar), job


def run_job(overtime, tmp_path, script, args=(), budget=15, lasts=20, options=(), **env):
    until = time.time() + lasts
    return overtime.run(["--budget", "{}s".format(budget), "--window", WINDOW, "--grace", "5s"] + list(options),
                        [PYTHON, JOBS / script] + list(args), job_env(until, **env), tmp_path)


# ---- Keras 3 (torch backend) ------------------------------------------------------------------

@pytest.mark.parametrize("mode, verbose, bar, title", [
    ("fit", 1, "keras-fit", "Epoch 1/"),
    ("fit", 2, "keras-fit", "Epoch 1/"),      # verbose=2 never calls Progbar.update per batch
    ("evaluate", 2, "keras-evaluate", "Evaluate"),
    ("predict", 1, "keras-predict", "Predict"),
])
def test_keras_reports_every_batch(overtime, tmp_path, mode, verbose, bar, title):
    job = run_job(overtime, tmp_path, "keras_job.py", [mode, verbose])
    moved = healthy(job, bar, title)
    if mode == "fit":
        assert any("loss" in str(e.get("detail", "")) for e in moved), moved[-3:]
        assert job.progress("keras-validation"), "fit's validation reports too: {}".format(job)


def test_keras_without_its_bridge_is_cancelled(overtime, tmp_path):
    job = run_job(overtime, tmp_path, "keras_job.py", ["fit", 2], OVERTIME_KERAS="0")
    cancelled_for_silence(job, "keras-")


# ---- Hugging Face Trainer with disable_tqdm=True -----------------------------------------------

def test_transformers_trainer_without_tqdm_reports_every_step(overtime, tmp_path):
    job = run_job(overtime, tmp_path, "transformers_job.py")
    moved = healthy(job, "hf-train", "train")
    assert any("loss" in str(e.get("detail", "")) for e in moved), moved[-3:]
    assert job.progress("hf-eval"), "the evaluation reports too: {}".format(job)


def test_transformers_without_its_bridge_is_cancelled(overtime, tmp_path):
    job = run_job(overtime, tmp_path, "transformers_job.py", OVERTIME_TRANSFORMERS="0")
    cancelled_for_silence(job, "hf-")


# ---- joblib.Parallel --------------------------------------------------------------------------

@pytest.mark.parametrize("backend, verbose", [("loky", 0), ("multiprocessing", 10), ("threading", 0), ("sequential", 0)])
def test_joblib_parallel_reports_tasks_done(overtime, tmp_path, backend, verbose):
    job = run_job(overtime, tmp_path, "joblib_job.py", [backend, verbose], budget=4, lasts=8)
    healthy(job, "joblib-", "joblib.Parallel")
    # The events thin progress to a few a second; the report has the task's last.
    last = job.report["progress"]
    assert last["completed"] == last["total"] and last.get("closed"), "the last message says all done: {}".format(last)


def test_joblib_without_its_bridge_is_cancelled(overtime, tmp_path):
    job = run_job(overtime, tmp_path, "joblib_job.py", ["loky", 10], budget=4, lasts=8, OVERTIME_JOBLIB="0")
    cancelled_for_silence(job, "joblib-")


# ---- Lightning with enable_progress_bar=False --------------------------------------------------

def test_lightning_without_a_bar_reports_its_loops(overtime, tmp_path):
    job = run_job(overtime, tmp_path, "lightning_job.py")
    healthy(job, "lightning-train", "Epoch 1/")
    titles = {e.get("title") for e in job.progress("lightning-validation")}
    assert {"Sanity Checking", "Validation"} <= titles, titles
    assert job.progress("lightning-test"), job


def test_lightning_without_its_bridge_is_cancelled(overtime, tmp_path):
    job = run_job(overtime, tmp_path, "lightning_job.py", OVERTIME_LIGHTNING="0")
    cancelled_for_silence(job, "lightning-")


# ---- Lightning's TQDMProgressBar(refresh_rate=1000): the bar is redrawn once an epoch ----------
# An epoch of 200 batches takes longer than the window; Lightning moves its bar only every
# refresh_rate batches (here: at the epoch's end), and the Lightning bridge counts each batch.

def test_lightning_tqdm_bar_with_a_large_refresh_rate_reports_every_batch(overtime, tmp_path):
    job = run_job(overtime, tmp_path, "lightning_job.py", LIGHTNING_BAR="tqdm:1000", EPOCH_BATCHES="200")
    moved = healthy(job, "tqdm-", "Epoch 0")
    assert any(0 < e.get("completed", 0) < 200 for e in moved), "counts within an epoch: {}".format(moved[-3:])


def test_lightning_tqdm_bar_with_a_large_refresh_rate_without_its_bridge_is_cancelled(overtime, tmp_path):
    job = run_job(overtime, tmp_path, "lightning_job.py", LIGHTNING_BAR="tqdm:1000", EPOCH_BATCHES="200",
                  OVERTIME_LIGHTNING="0")
    assert job.code == 124 and job.cancel_reason == "timeout", job


# ---- torchrun, two ranks on gloo, rank-independent work; rank 1 hangs -------------------------

def run_ddp(overtime, tmp_path, options=()):
    torchrun = os.path.join(os.path.dirname(PYTHON), "torchrun")
    until = time.time() + 20
    return overtime.run(["--budget", "15s", "--window", WINDOW, "--grace", "5s"] + list(options),
                        [torchrun, "--standalone", "--nproc_per_node=2", JOBS / "ddp_job.py"],
                        job_env(until, HANG_RANK="1"), tmp_path)


def test_ddp_a_stuck_rank_is_caught_with_every_reporter(overtime, tmp_path):
    job = run_ddp(overtime, tmp_path, ["--every-reporter"])
    assert job.code == 124 and job.cancel_reason == "timeout", job
    assert "rank 0 done" not in job.stdout, "caught while rank 0 still worked: {}".format(job)
    assert "rank 1 went quiet" in job.stderr, job
    named = {e.get("reporter") for e in job.progress("tqdm-")}
    assert {"rank 0", "rank 1"} <= named, "each rank reports as itself: {}".format(named)


def test_ddp_without_every_reporter_a_stuck_rank_is_found_only_when_the_others_end(overtime, tmp_path):
    job = run_ddp(overtime, tmp_path)
    assert "rank 0 done" in job.stdout, "rank 0's progress kept the job alive to its end: {}".format(job)
    assert job.code == 124 and job.cancel_reason == "timeout", job
