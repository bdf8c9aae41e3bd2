"""The example workers and the misbehaving fixtures under the real `overtime run`."""

import csv
import os
import signal
import time

import pytest

from conftest import FIXTURES, PYTHON, WORKERS, clean_env

import numpy as np  # installed by scripts/setup: missing is a failure, not a skip

TRAIN = WORKERS / "train-model" / "train.py"
AGGREGATE = WORKERS / "aggregate-csv" / "aggregate.py"


# ---- train-model ---------------------------------------------------------------------------

def test_train_model_checkpoints_when_cancelled_and_resumes_from_the_saved_epoch(overtime, tmp_path):
    checkpoint = tmp_path / "ck.npz"
    args = [PYTHON, TRAIN, "--epochs", "12", "--batch-delay", "0.01", "--checkpoint", checkpoint]
    first = overtime.run(["--budget", "5s", "--max-runtime", "2.5s", "--warn-before", "1s", "--grace", "5s"], args)
    assert first.code == 124, first
    assert first.report["cancel_reason"] == "deadline"
    assert "checkpoint (expiring)" in first.stdout, first
    assert "checkpoint (cancelled: deadline)" in first.stdout, first
    progress = first.report["progress"]
    assert progress["total"] == 12 * 40 and 0 < progress["completed"] < 12 * 40
    assert progress["title"].startswith("Epoch ") and progress["detail"].startswith("loss ")
    with np.load(str(checkpoint)) as saved:
        epoch, batch = int(saved["epoch"]), int(saved["batch"])
    assert epoch >= 1, "the first run should get through an epoch in 2.5 s"
    assert epoch * 40 + batch <= progress["completed"]

    second = overtime.run(["--budget", "5s"], args)
    assert second.code == 0, second
    result = second.report["result"]
    assert result["resumed_from"] == epoch > 0
    assert result["epochs"] == 12 and result["accuracy"] > 0.9 and result["loss"] < 0.3
    assert "resuming from" in second.stdout
    assert second.report["progress"]["completed"] == 12 * 40


def test_train_model_runs_standalone(tmp_path):
    import subprocess
    out = subprocess.run([PYTHON, str(TRAIN), "--epochs", "3", "--checkpoint", str(tmp_path / "ck.npz")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60,
                         env=clean_env())
    assert out.returncode == 0, out.stdout
    assert "train: done" in out.stdout


# ---- aggregate-csv ---------------------------------------------------------------------------

def expected_aggregates(path):
    rows = quantity = revenue = 0
    regions = {}
    products = {}
    days = []
    with open(str(path), newline="") as f:
        for row in csv.DictReader(f):
            n = int(row["quantity"])
            cents = int(round(float(row["unit_price"]) * 100)) * n
            rows += 1
            quantity += n
            revenue += cents
            r = regions.setdefault(row["region"], [0, 0])
            r[0] += 1
            r[1] += cents
            products[row["product"]] = products.get(row["product"], 0) + cents
            days.append(row["day"])
    return {
        "rows": rows, "revenue": revenue / 100, "quantity": quantity,
        "by_region": {k: {"rows": v[0], "revenue": v[1] / 100} for k, v in sorted(regions.items())},
        "top_product": max(products, key=products.get), "first_day": min(days), "last_day": max(days),
    }


def test_aggregate_csv_streams_a_generated_file_and_returns_correct_aggregates(overtime, tmp_path):
    data = tmp_path / "sales.csv"
    run = overtime.run(["--budget", "1s"], [PYTHON, AGGREGATE, "--csv", data, "--rows", "60000",
                                           "--chunk-size", "65536", "--chunk-delay", "0.04"])
    assert run.code == 0, run
    size = data.stat().st_size
    assert size > 2000000
    assert run.report["progress"]["completed"] == size == run.report["progress"]["total"]
    assert run.report["elapsed"] > 1, "it outlived its budget on progress"
    assert run.report["result"] == expected_aggregates(data)


# ---- fixtures --------------------------------------------------------------------------------

def test_ignore_term_is_killed_after_grace(overtime):
    run = overtime.run(["--budget", "1s", "--grace", "1s"], [PYTHON, FIXTURES / "ignore-term.py"])
    assert run.code == 137, run
    assert run.report["killed"] is True and run.report["cancel_reason"] == "timeout"
    assert run.report["signal"] == "SIGKILL"
    assert 1.8 < run.report["elapsed"] < 8


def test_garbage_on_fd_3_is_counted_and_harmless(overtime):
    run = overtime.run([], [PYTHON, FIXTURES / "garbage.py"])
    assert run.code == 0, run
    assert run.report["protocol_errors"] == 10
    assert run.report["result"] == {"garbage_lines": 10, "ok": True}


def test_a_flood_of_progress_is_read_to_the_last_message(overtime):
    run = overtime.run(["--budget", "1s"], [PYTHON, FIXTURES / "flood.py", "2"])
    assert run.code == 0, run
    sent = run.report["result"]["sent"]
    assert sent == 200000
    assert run.report["progress"]["completed"] == sent == run.report["progress"]["total"]
    assert run.report["protocol_errors"] == 0
    assert run.seconds < 20


def read_pids(path):
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = {}
    for line in path.read_text().splitlines():
        if line != "done":
            kind, pid = line.split()
            pids[kind] = int(pid)
    return pids


def alive(pid):
    try:
        with open("/proc/{}/stat".format(pid)) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def gone_soon(pid, within=5.0):
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.parametrize("linger", [None, "0.3"], ids=["cancelled", "left-behind"])
def test_grandchildren_in_the_group_go_with_the_task(overtime, tmp_path, linger):
    pidfile = tmp_path / "pids"
    command = [PYTHON, FIXTURES / "grandchildren.py", pidfile] + ([linger] if linger else [])
    run = overtime.run(["--budget", "1s", "--grace", "3s"], command)
    pids = read_pids(pidfile)
    try:
        assert run.code == (124 if linger is None else 0), run
        assert gone_soon(pids["forked"]) and gone_soon(pids["exec"]), "a grandchild in the task's group outlived it"
        # The setsid grandchild left the group and still holds fd 3: Overtime stops
        # waiting for the channel after its drain limit instead of hanging on it.
        assert run.seconds < 10
    finally:
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
