"""Phases and checkpoint advice under the real `overtime run` (OVERTIME_BIN): the advice
reaches the Python handler and the poll before max-runtime, a `checkpoint` phase teaches
the supervisor how long a checkpoint takes, and a phase's own window covers a silence
longer than the budget. What the supervisor did is read from its events file."""

import datetime
import json

from conftest import PYTHON, write_script

# A job of 1000 steps of 0.1 s (100 s of work) that never finishes in the 6 s it is given:
# it writes what the handler and the poll saw of the advice, then stops as a job that has
# saved its state would. PHASE_BEFORE: a phase entered for CHECKPOINT_SECONDS first.
ADVISED_JOB = """\
import json, sys, time, overtime_worker as ot
out = sys.argv[1]

def handler(advice):
    with open(out + ".handler", "w") as f:
        json.dump({"action": advice.action, "remaining": advice.remaining, "why": advice.why}, f)

ot.on_checkpoint_advice(handler)
{before}
for step in range(1000):
    ot.progress(completed=step, total=1000)
    advice = ot.checkpoint_advised()
    if advice is not None:
        with open(out + ".poll", "w") as f:
            json.dump({"remaining": advice.remaining, "left": advice.left(), "step": step}, f)
        time.sleep(0.3)   # the handler's thread writes its file meanwhile
        break
    time.sleep(0.1)
"""

CHECKPOINT_FIRST = """\
with ot.phase("checkpoint"):
    time.sleep(1.0)   # an early checkpoint write: silent, 1 s
"""


def events_of(path):
    with open(str(path)) as f:
        return [json.loads(line) for line in f if line.strip()]


def seconds_since_start(events, event):
    """When `event` was written, in seconds after the task's `started` event."""
    def at(e):
        return datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    started = next(e for e in events if e["event"] == "started")
    return (at(event) - at(started)).total_seconds()


def advised_run(overtime, tmp_path, options, before=""):
    script = write_script(tmp_path, "advised.py", ADVISED_JOB.replace("{before}", before))
    events_file = tmp_path / "events.jsonl"
    out = tmp_path / "seen"
    run = overtime.run(options + ["--events", str(events_file)], [PYTHON, script, out])
    events = events_of(events_file)
    handler = json.loads((tmp_path / "seen.handler").read_text()) if (tmp_path / "seen.handler").exists() else None
    poll = json.loads((tmp_path / "seen.poll").read_text()) if (tmp_path / "seen.poll").exists() else None
    return run, events, handler, poll


def test_checkpoint_lead_brings_the_advice_to_the_handler_before_max_runtime(overtime, tmp_path):
    run, events, handler, poll = advised_run(overtime, tmp_path, ["--max-runtime", "6s", "--checkpoint-lead", "3s"])
    assert run.code == 0 and run.report["cancel_reason"] is None, run
    assert run.report["elapsed"] < 6, "the job stopped on the advice, not at max-runtime: {}".format(run)
    advice = [e for e in events if e["event"] == "advice"]
    assert len(advice) == 1, events
    advice = advice[0]
    assert advice["do"] == "checkpoint" and 2.5 < advice["remaining"] <= 3, advice
    assert "max-runtime" in advice["why"], advice
    # Due when max-runtime is 3 s away: about 3 s after the start.
    assert 2.9 <= seconds_since_start(events, advice) < 4.5, advice
    assert handler == {"action": "checkpoint", "remaining": handler["remaining"], "why": advice["why"]}, handler
    assert abs(handler["remaining"] - advice["remaining"]) < 0.01, (handler, advice)
    assert abs(poll["remaining"] - advice["remaining"]) < 0.01 and 0 < poll["left"] <= poll["remaining"], poll
    assert poll["step"] < 60, "it came at about step 30 of 1000: {}".format(poll)


def test_a_checkpoint_phase_teaches_the_lead(overtime, tmp_path):
    # No --checkpoint-lead: the lead is 1.5 x the 1 s checkpoint phase, so the advice is due
    # when max-runtime is about 1.5 s away.
    run, events, handler, poll = advised_run(overtime, tmp_path, ["--max-runtime", "6s", "--budget", "3s"],
                                             before=CHECKPOINT_FIRST)
    assert run.code == 0 and run.report["cancel_reason"] is None, run
    assert run.report["elapsed"] < 6, run
    assert [e["name"] for e in events if e["event"] == "phase"] == ["checkpoint", "main"], events
    advice = [e for e in events if e["event"] == "advice"]
    assert len(advice) == 1, events
    advice = advice[0]
    assert 1.0 < advice["remaining"] <= 1.7, advice
    assert 4.2 <= seconds_since_start(events, advice) < 5.5, advice
    assert "a checkpoint takes about 1.5" in advice["why"], advice
    assert handler is not None and handler["why"] == advice["why"], handler
    assert poll is not None and abs(poll["remaining"] - advice["remaining"]) < 0.01, poll


COMPILE_JOB = """\
import time, overtime_worker as ot
with ot.phase("compile"{window}):
    time.sleep(5)   # silent, longer than the 2 s budget
for step in range(5):
    ot.progress(completed=step + 1, total=5)
    time.sleep(0.2)
"""


def test_a_phase_window_covers_a_silence_longer_than_the_budget(overtime, tmp_path):
    script = write_script(tmp_path, "compile.py", COMPILE_JOB.format(window=", window=20"))
    events_file = tmp_path / "events.jsonl"
    run = overtime.run(["--budget", "2s", "--events", str(events_file)], [PYTHON, script])
    assert run.code == 0 and run.report["cancel_reason"] is None, run
    assert run.report["elapsed"] > 5, run
    phases = [(e["name"], e["window"]) for e in events_of(events_file) if e["event"] == "phase"]
    assert phases == [("compile", 20), ("main", 2)], phases


def test_without_its_window_the_same_silence_is_cancelled(overtime, tmp_path):
    script = write_script(tmp_path, "compile.py", COMPILE_JOB.format(window=""))
    run = overtime.run(["--budget", "2s", "--grace", "1s"], [PYTHON, script])
    assert run.code == 124 and run.report["cancel_reason"] == "timeout", run
    assert run.seconds < 5, run
