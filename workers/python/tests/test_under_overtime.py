"""Python jobs under the real `overtime run` (OVERTIME_BIN): tqdm, stalls, extend, cancel."""

import signal
import textwrap

import pytest

from conftest import FIXTURES, PYTHON, write_script

TQDM_LOOP = """\
import time
from tqdm import tqdm
for x in tqdm(range({n}){args}):
    time.sleep({pause})
"""


def tqdm_script(tmp_path, n=12, pause=0.25, args=""):
    return write_script(tmp_path, "loop.py", TQDM_LOOP.format(n=n, pause=pause, args=args))


def test_an_unmodified_tqdm_loop_outlives_its_budget_on_progress(overtime, tmp_path):
    run = overtime.run(["--budget", "1s"], [PYTHON, tqdm_script(tmp_path)])
    assert run.code == 0, run
    assert run.report["cancel_reason"] is None
    assert run.report["elapsed"] > 2, "it ran past its 1 s budget"
    assert run.report["progress"]["completed"] == 12 and run.report["progress"]["total"] == 12, run


def test_an_unmodified_tqdm_loop_reports_with_the_bar_disabled(overtime, tmp_path):
    run = overtime.run(["--budget", "1s"], [PYTHON, tqdm_script(tmp_path, args=", disable=True")])
    assert run.code == 0, run
    assert run.report["progress"]["completed"] == 12 and run.report["progress"]["total"] == 12, run
    assert "it/s" not in run.stderr   # the bar really was disabled


def test_description_and_postfix_reach_the_report(overtime, tmp_path):
    script = write_script(tmp_path, "manual.py", textwrap.dedent("""\
        import time
        from tqdm import tqdm
        with tqdm(total=8, desc="Uploading") as bar:
            for part in range(8):
                time.sleep(0.2)
                bar.set_postfix(part=part + 1)
                bar.update(1)
        """))
    run = overtime.run(["--budget", "1s"], [PYTHON, script])
    assert run.code == 0, run
    progress = dict(run.report["progress"])
    assert progress.pop("bar", "tqdm-1") == "tqdm-1", run   # a supervisor that keeps bar ids shows it
    assert progress.pop("closed", True) is True, run        # the bar closed at the end of its with block
    assert progress.pop("reporter", "pid {}".format(run.report.get("pid"))).startswith("pid "), run
    assert progress == {"completed": 8, "total": 8, "fraction": 1, "title": "Uploading", "detail": "part=8"}


def test_without_the_bridge_the_same_loop_is_cancelled(overtime, tmp_path):
    # Set in the task's own environment: `overtime run` passes on no OVERTIME_* variable of
    # its own environment.
    run = overtime.run(["--budget", "1s", "--grace", "5s"], ["env", "OVERTIME_TQDM=0", PYTHON, tqdm_script(tmp_path)])
    assert run.code == 124, run
    assert run.report["cancel_reason"] == "timeout" and run.report["progress"] is None


def test_a_stalled_job_is_cancelled_and_explains_where_it_hung(overtime):
    run = overtime.run(["--budget", "1s", "--grace", "5s"], [PYTHON, FIXTURES / "stall.py"])
    assert run.code == 124, run
    assert run.report["cancel_reason"] == "timeout" and not run.report["killed"]
    assert "cancelled for timeout" in run.stderr
    assert "in wait_for_server" in run.stderr and "in prefetch_loop" in run.stderr, run
    assert run.stderr.index("in wait_for_server") < run.stderr.index("stall: cancelled (timeout)")
    assert run.report["progress"]["completed"] == 3
    assert run.seconds < 10


def test_extend_buys_time_for_a_silent_step(overtime, tmp_path):
    script = write_script(tmp_path, "extend.py", textwrap.dedent("""\
        import time, overtime_worker as ot
        granted = ot.extend(4, why="compacting")
        time.sleep(2.5)                         # silent, longer than the 1 s budget
        ot.result({"granted": granted, "remaining": ot.remaining()})
        """))
    run = overtime.run(["--budget", "1s"], [PYTHON, script])
    assert run.code == 0, run
    assert 3.5 <= run.report["result"]["granted"] <= 4
    assert 0 < run.report["result"]["remaining"] < 2


def test_extend_is_clipped_by_max_runtime(overtime, tmp_path):
    script = write_script(tmp_path, "clipped.py", textwrap.dedent("""\
        import overtime_worker as ot
        ot.result(ot.extend(60))
        """))
    run = overtime.run(["--budget", "1s", "--max-runtime", "3s"], [PYTHON, script])
    assert run.code == 0, run
    assert 2 < run.report["result"] <= 3


CATCHER = """\
import sys, time, overtime_worker as ot
try:
    print("ready", flush=True)   # inside the try: the signal may come as soon as it is out
    time.sleep(60)
except ot.Cancelled as c:
    ot.result({"reason": c.reason, "grace": c.grace})
    sys.exit(3)
"""


def test_ctrl_c_to_overtime_reaches_the_job_as_a_user_cancel(overtime, tmp_path):
    script = write_script(tmp_path, "catch.py", CATCHER)
    process = overtime.start(["--grace", "4s", "--json", "--progress", "none"], [PYTHON, script])
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 3, (out, err)      # the job's own status after a user cancel
    assert '"result":{"reason":"user","grace":4}' in out, out


def test_sigterm_to_overtime_reaches_the_job_as_shutdown(overtime, tmp_path):
    script = write_script(tmp_path, "catch.py", CATCHER)
    process = overtime.start(["--grace", "4s"], [PYTHON, script])
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 3, (out, err)
    assert '"reason":"shutdown"' in out, out


def test_on_cancel_handler_and_finally_block_run_within_grace(overtime, tmp_path):
    marker = tmp_path / "cleaned"
    script = write_script(tmp_path, "cleanup.py", textwrap.dedent("""\
        import sys, time, overtime_worker as ot
        seen = []
        ot.on_cancel(lambda reason, grace: seen.append(reason))
        try:
            while True:
                time.sleep(0.1)   # never reports
        finally:
            time.sleep(0.2)       # let the handler thread run
            open(sys.argv[1], "w").write(",".join(seen) + "|" + str(ot.cancel_reason()))
        """))
    run = overtime.run(["--budget", "1s", "--grace", "5s"], [PYTHON, script, marker])
    assert run.code == 124, run
    assert marker.read_text() == "timeout|timeout"
    assert "Traceback" in run.stderr and "Cancelled" in run.stderr   # uncaught: Python's usual report


def test_the_result_is_delivered_even_when_the_job_exits_at_once(overtime, tmp_path):
    script = write_script(tmp_path, "quick.py", textwrap.dedent("""\
        import overtime_worker as ot
        for i in range(50000):
            ot.progress(completed=i + 1, total=50000)
        ot.ready()
        ot.result("done")
        """))
    run = overtime.run([], [PYTHON, script])
    assert run.code == 0, run
    assert run.report["result"] == "done" and run.report["ready"] is True
    assert run.report["progress"]["completed"] == 50000
    assert run.report["protocol_errors"] == 0


def test_expiring_reaches_on_expiring(overtime, tmp_path):
    script = write_script(tmp_path, "expiring.py", textwrap.dedent("""\
        import threading, overtime_worker as ot
        warned = threading.Event()
        got = []
        ot.on_expiring(lambda remaining: (got.append(remaining), warned.set()))
        warned.wait(10)
        ot.result(got)
        """))
    run = overtime.run(["--budget", "3s", "--warn-before", "2s"], [PYTHON, script])
    assert run.code == 0, run
    assert len(run.report["result"]) == 1 and 0 < run.report["result"][0] <= 2
    assert run.seconds < 10


GROW_WITH_HANDLER = """\
import time
import overtime_worker as ot

blocks, warned = [], []

@ot.on_memory_warning
def shrink(used, limit):
    warned.append((used, limit))

try:
    for i in range(60):
        if warned:
            # The job's answer to the warning: drop half of what it holds, then carry on
            # smaller. The watchdog sees the memory fall and lets it finish.
            del blocks[len(blocks) // 2:]
            print("warned at", warned[0][0], "of", warned[0][1], "; now", len(blocks), "blocks", flush=True)
            break
        blocks.append(bytearray(10 << 20))
        for j in range(0, 10 << 20, 4096):
            blocks[-1][j] = 1
        time.sleep(0.05)
    time.sleep(1.0)
except ot.Cancelled as cancelled:
    print("cancelled:", cancelled.reason, flush=True)
    raise SystemExit(3)
"""


@pytest.mark.parametrize("cgroup", ["auto", "off"])
def test_a_job_that_shrinks_on_its_memory_warning_is_not_cancelled(overtime, tmp_path, cgroup):
    script = write_script(tmp_path, "grow.py", GROW_WITH_HANDLER)
    run = overtime.run(["--cgroup", cgroup, "--memory-max", "300M", "--memory-warn", "150M", "--grace", "5s"], [PYTHON, script])
    assert run.code == 0, run
    assert "warned at" in run.stdout and "of 314572800" in run.stdout, run
    assert run.report["cancel_reason"] is None, run


@pytest.mark.parametrize("cgroup", ["auto", "off"])
def test_a_job_that_ignores_its_warning_reads_a_memory_cancel(overtime, tmp_path, cgroup):
    script = write_script(tmp_path, "grow.py", GROW_WITH_HANDLER.replace("if warned:", "if False:"))
    run = overtime.run(["--cgroup", cgroup, "--memory-max", "200M", "--grace", "5s"], [PYTHON, script])
    assert run.code == 124, run
    assert "cancelled: memory" in run.stdout, run
    assert run.report["cancel_reason"] == "memory", run
