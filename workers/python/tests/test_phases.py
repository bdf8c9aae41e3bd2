"""Phases and checkpoint advice, in a real child process whose fd 3 is one end of a
socketpair; this test holds the other end, as the supervisor does."""

import datetime
import json

import pytest

import overtime_worker as ot
from conftest import FakeSupervisor, run_child, start_child


def phases(sent):
    return [(m["name"], m.get("window")) for m in sent if m["type"] == "phase"]


def test_phases_enter_and_leave_in_order_nested_and_through_exceptions():
    code, out, sent = run_child(
        "import datetime, overtime_worker as ot\n"
        "ot.set_phase('load')\n"
        "@ot.phase('checkpoint', window=datetime.timedelta(minutes=2))\n"
        "def save(path):\n"
        "    'Writes the state.'\n"
        "    return path\n"
        "with ot.phase('compile', window=600):\n"
        "    print(save('ckpt'), save.__name__, save.__doc__)\n"
        "    try:\n"
        "        with ot.phase('validation', window=0):\n"
        "            raise RuntimeError('boom')\n"
        "    except RuntimeError:\n"
        "        pass\n"
        "    with ot.phase('compile', window=600):\n"
        "        pass\n"
        "    with ot.phase('compile', window=1.5):\n"
        "        pass\n"
        "with ot.phase('export'):\n"
        "    ot.set_phase('upload')\n"
        "ot.result('done')\n")
    assert code == 0 and out.split() == ["ckpt", "save", "Writes", "the", "state."]
    assert phases(sent) == [
        ("load", None),
        ("compile", 600),
        ("checkpoint", 120), ("compile", 600),      # the decorator, around each call
        ("validation", 0), ("compile", 600),        # left by an exception: the outer phase again
        # the same phase and window again: nothing to say
        ("compile", 1.5), ("compile", 600),
        ("load", None),
        ("export", None), ("upload", None),         # set_phase renames the block it is in...
        ("load", None),                             # ...whose end returns to the phase before it
    ]
    assert sent[-1] == {"type": "result", "value": "done"}


def test_leaving_the_outermost_phase_returns_to_main():
    code, _, sent = run_child("import overtime_worker as ot\n"
                              "with ot.phase('warm-up'):\n"
                              "    ot.progress(completed=1, total=2)\n"
                              "    ot.flush()   # else the next progress replaces it\n"
                              "ot.progress(completed=2, total=2)\n")
    assert code == 0
    assert [(m["type"], m.get("name", m.get("completed"))) for m in sent] == [
        ("phase", "warm-up"), ("progress", 1), ("phase", "main"), ("progress", 2)]


def test_a_thread_leaving_an_older_phase_leaves_the_newer_one_in_force():
    code, _, sent = run_child(
        "import threading, overtime_worker as ot\n"
        "a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()\n"
        "def a():\n"
        "    with ot.phase('a'):\n"
        "        a_in.set(); b_in.wait()\n"
        "    a_out.set()\n"
        "def b():\n"
        "    a_in.wait()\n"
        "    with ot.phase('b'):\n"
        "        b_in.set(); a_out.wait()\n"
        "threads = [threading.Thread(target=f) for f in (a, b)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n")
    assert code == 0
    assert phases(sent) == [("a", None), ("b", None), ("main", None)]


ADVICE = {"type": "advice", "do": "checkpoint", "remaining": 412.5, "why": "max-runtime ends in 6m52s"}


def test_advice_reaches_the_handler_off_the_main_thread_and_the_poll():
    child, ours = start_child(
        "import json, threading, time, overtime_worker as ot\n"
        "calls, called = [], threading.Event()\n"
        "@ot.on_checkpoint_advice\n"
        "def checkpoint(advice):\n"
        "    calls.append([advice.action, advice.remaining, advice.why,\n"
        "                  threading.current_thread() is threading.main_thread(), advice.left() <= advice.remaining])\n"
        "    called.set()\n"
        "before = ot.checkpoint_advised()\n"
        "ot.ready()\n"
        "assert called.wait(10)\n"
        "while ot.remaining() is None:   # the budget sent after the second advice: both were read\n"
        "    time.sleep(0.01)\n"
        "late = threading.Event()\n"
        "ot.on_checkpoint_advice(lambda advice: (calls.append(['late', advice.remaining]), late.set()))\n"
        "assert late.wait(10)\n"
        "print(json.dumps({'before': before, 'calls': calls, 'polled': ot.checkpoint_advised()._asdict()}))\n")
    supervisor = FakeSupervisor(ours)
    supervisor.wait_for(lambda m: m["type"] == "ready")
    for message in [
        dict(ADVICE, do="compress"),                            # a newer Overtime's advice, not for this library
        {"type": "advice", "remaining": 10, "why": "x"},        # advice to do nothing
        dict(ADVICE, remaining="soon"),
        dict(ADVICE, remaining=-1),
        {"type": "advice", "do": "checkpoint"},
        ADVICE,
        dict(ADVICE, remaining=5),                              # only the first advice counts
        {"type": "budget", "remaining": 99},
    ]:
        supervisor.send(message)
    out, _ = child.communicate(timeout=20)
    ours.close()
    assert child.returncode == 0, out
    report = json.loads(out)
    assert report["before"] is None
    assert report["calls"] == [["checkpoint", 412.5, "max-runtime ends in 6m52s", False, True], ["late", 412.5]]
    assert {k: v for k, v in report["polled"].items() if k != "received"} == {
        "action": "checkpoint", "remaining": 412.5, "why": "max-runtime ends in 6m52s"}


def test_an_advice_with_an_unknown_action_alone_changes_nothing():
    child, ours = start_child(
        "import time, overtime_worker as ot\n"
        "ot.on_checkpoint_advice(lambda advice: print('called'))\n"
        "ot.ready()\n"
        "while ot.remaining() is None:\n"
        "    time.sleep(0.01)\n"
        "print('advised' if ot.checkpoint_advised() else 'not advised')\n")
    supervisor = FakeSupervisor(ours)
    supervisor.wait_for(lambda m: m["type"] == "ready")
    supervisor.send(dict(ADVICE, do="rebalance"))
    supervisor.send({"type": "budget", "remaining": 99})
    out, _ = child.communicate(timeout=20)
    ours.close()
    assert (child.returncode, out) == (0, "not advised\n")


# ---- outside Overtime, and bad arguments ------------------------------------------------------

def test_phases_and_advice_are_quiet_no_ops_outside_overtime():
    assert not ot.active()

    @ot.phase("checkpoint")
    def save():
        return "saved"

    with ot.phase("compile", window=datetime.timedelta(seconds=90)):
        ot.set_phase("link", window=0)
        assert save() == "saved"
    handler = ot.on_checkpoint_advice(lambda advice: None)
    assert callable(handler)
    assert ot.checkpoint_advised() is None


@pytest.mark.parametrize("name, window, error", [
    (None, None, TypeError),
    (3, None, TypeError),
    ("", None, ValueError),
    ("  ", None, ValueError),
    ("x", "10s", TypeError),
    ("x", True, TypeError),
    ("x", -1, ValueError),
    ("x", float("nan"), ValueError),
    ("x", float("inf"), ValueError),
    ("x", datetime.timedelta(seconds=-5), ValueError),
])
def test_bad_phase_arguments_are_refused_everywhere(name, window, error):
    with pytest.raises(error):
        ot.phase(name, window)
    with pytest.raises(error):
        ot.set_phase(name, window)


def test_a_generator_or_coroutine_function_is_refused_as_a_phase():
    def numbers():
        yield 1

    async def fetch():
        return 1

    for function in (numbers, fetch):
        with pytest.raises(TypeError, match="plain functions"):
            ot.phase("load")(function)


def test_a_phase_object_can_be_entered_again(supervisor):
    compile_phase = ot.phase("compile")
    with compile_phase:
        with ot.phase("link"):
            with compile_phase:
                pass
    assert ot.flush(5)
    supervisor.drain(0.2)
    assert phases(supervisor.received) == [("compile", None), ("link", None), ("compile", None), ("link", None),
                                           ("compile", None), ("main", None)]


def test_a_name_the_supervisor_could_not_read_is_made_valid(supervisor):
    with ot.phase("caf\u00e9 \udce9" + "x" * 5000, window=2.25):   # a lone surrogate, and too long
        pass
    line = supervisor.wait_for(lambda m: m["type"] == "phase")
    assert line == {"type": "phase", "name": ("caf\u00e9 ?" + "x" * 5000)[:4096], "window": 2.25}
