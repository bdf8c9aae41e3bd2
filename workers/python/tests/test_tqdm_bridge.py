"""The tqdm bridge, against a fake supervisor, and its start-up hook in fresh interpreters."""

import hashlib
import io
import json
import os
import socket
import subprocess
import sysconfig
import time

import pytest

from conftest import PYTHON, SOURCE, clean_env, read_messages
from conftest import per_bar as shared_per_bar

import tqdm.std as tqdm_std  # installed by scripts/setup: missing is a failure, not a skip
import overtime_worker  # noqa: E402
from overtime_worker import tqdm_bridge  # noqa: E402

tqdm_bridge.patch()
tqdm = tqdm_std.tqdm


def quiet(**kwargs):
    kwargs.setdefault("file", io.StringIO())
    kwargs.setdefault("mininterval", 0)
    return kwargs


def per_bar(supervisor):
    return shared_per_bar(supervisor, "tqdm")


def last_progress(supervisor):
    """The latest state of the bar that moved last, without its id."""
    bars = per_bar(supervisor)
    state = dict(list(bars.values())[-1]) if bars else {}
    state.pop("bar", None)
    return state


def test_patching_twice_is_harmless():
    assert tqdm_bridge.patch() is False
    assert tqdm.update.__wrapped__ is not None


def test_an_iterated_bar_reports_n_and_total(supervisor):
    for _ in tqdm(range(25), desc="Epoch 1", **quiet()):
        pass
    assert last_progress(supervisor) == {"type": "progress", "completed": 25, "total": 25, "title": "Epoch 1",
                                         "closed": True}


@pytest.mark.parametrize("disable", [True, None])   # None: disabled because the file is no terminal
def test_a_disabled_bar_still_reports(supervisor, disable):
    bar = tqdm(range(40), "Scoring", disable=disable, file=io.StringIO())
    assert bar.disable
    for _ in bar:
        pass
    assert bar.n == 40
    assert last_progress(supervisor) == {"type": "progress", "completed": 40, "total": 40, "title": "Scoring",
                                         "closed": True}


def test_manual_updates_description_and_postfix(supervisor):
    bar = tqdm(total=200, unit="B", **quiet())
    bar.set_description("Uploading")
    for _ in range(10):
        bar.update(10)
    bar.set_postfix(loss=0.25, part=7)
    bar.refresh()
    bar.close()
    assert last_progress(supervisor) == {"type": "progress", "completed": 100, "total": 200,
                                         "title": "Uploading", "detail": "loss=0.25, part=7", "closed": True}


def test_a_disabled_bar_counts_manual_updates(supervisor):
    bar = tqdm(total=10, disable=True)
    bar.set_description_str("Copying")
    bar.set_postfix_str("file 3")
    bar.update(3)
    bar.update(2.5)
    bar.close()
    assert last_progress(supervisor) == {"type": "progress", "completed": 5, "total": 10,
                                         "title": "Copying", "detail": "file 3", "closed": True}


def test_reset_starts_over_with_a_new_total(supervisor):
    bar = tqdm(total=5, **quiet())
    bar.update(5)
    bar.reset(total=8)
    assert last_progress(supervisor)["completed"] == 0
    assert supervisor.of_type("progress")[-1]["total"] == 8
    bar.update(2)
    bar.close()
    assert last_progress(supervisor)["completed"] == 2


def test_nested_bars_are_two_bars(supervisor):
    outer = tqdm(total=3, desc="Epochs", **quiet())
    inner = tqdm(total=7, leave=False, **quiet())
    inner.update(5)
    assert last_progress(supervisor) == {"type": "progress", "completed": 5, "total": 7, "title": "Epochs"}
    outer.update(1)
    bars = per_bar(supervisor)
    assert len(bars) == 2
    inner_id, outer_id = list(bars)   # in the order they last moved
    assert bars[outer_id]["completed"] == 1 and bars[outer_id]["total"] == 3
    assert bars[inner_id]["completed"] == 5 and bars[inner_id]["total"] == 7
    inner.close()            # back to the outer bar
    assert last_progress(supervisor) == {"type": "progress", "completed": 1, "total": 3, "title": "Epochs"}
    again = tqdm(total=7, leave=False, **quiet())   # the next epoch's inner bar: a new bar
    again.update(2)
    again.close()
    outer.update(2)
    outer.close()
    bars = per_bar(supervisor)
    assert len(bars) == 3 and bars[outer_id]["completed"] == 3
    assert [(state["completed"], state["total"]) for state in bars.values()] == [(5, 7), (2, 7), (3, 3)]


def test_each_bar_reports_whatever_its_redraw_settings(supervisor):
    # A redraw every 30 s, or every 100 items: the bridge counts every update itself.
    slow = tqdm(total=1000, mininterval=30, file=io.StringIO())
    coarse = tqdm(total=1000, miniters=100, mininterval=30, file=io.StringIO())
    for _ in range(7):
        slow.update()
        coarse.update()
    assert [state["completed"] for state in per_bar(supervisor).values()] == [7, 7]
    def of_the_loop():
        return [state for state in per_bar(supervisor).values() if state["total"] == 50][0]["completed"]
    for i, _ in enumerate(tqdm(range(50), mininterval=30, miniters=100, file=io.StringIO())):
        if i == 20:
            assert of_the_loop() == 20
    assert of_the_loop() == 50
    slow.close()
    coarse.close()


def test_the_throttle_sends_a_few_a_second_and_the_latest_soon(supervisor):
    bar = tqdm(total=10 ** 9, **quiet())
    started = time.monotonic()
    while time.monotonic() - started < 1.0:
        bar.update()
    supervisor.drain(0.5)   # no flush: the deferred last value comes by itself
    sent = [m for m in supervisor.of_type("progress")]
    assert 3 <= len(sent) <= 12, len(sent)
    assert sent[-1]["completed"] == bar.n
    bar.close()


def test_a_bar_without_total(supervisor):
    for _ in tqdm((i for i in range(12)), **quiet()):
        pass
    message = last_progress(supervisor)
    assert message["completed"] == 12 and "total" not in message


def test_a_tight_loop_stays_cheap(supervisor):
    started = time.monotonic()
    for _ in tqdm(range(200000), disable=True):
        pass
    bar = tqdm(total=100000, disable=True)
    for _ in range(100000):
        bar.update()
    bar.close()
    assert time.monotonic() - started < 5
    assert last_progress(supervisor)["completed"] == 100000
    assert len(supervisor.of_type("progress")) < 1000


def test_bars_work_as_before_outside_overtime():
    out = io.StringIO()
    for _ in tqdm(range(3), desc="Plain", file=out, mininterval=0):
        pass
    assert "3/3" in out.getvalue()
    bar = tqdm(total=4, disable=True)
    bar.update(4)
    assert bar.n == 0        # untouched: tqdm's own behaviour for a disabled bar
    bar.close()


# ---- the start-up hook, in fresh interpreters ------------------------------------------------

def site_packages_hook():
    purelib = sysconfig.get_paths()["purelib"]
    return os.path.join(purelib, "overtime_worker.pth")


def test_pip_put_the_startup_hook_in_site_packages():
    path = site_packages_hook()
    assert os.path.isfile(path), "{} is missing: run scripts/setup (pip install ./workers/python)".format(path)
    with open(path) as installed, open(str(SOURCE / "overtime_worker.pth")) as source:
        assert installed.read() == source.read()


def test_the_installed_package_is_the_source_tree():
    # scripts/setup reinstalls when the sources change; a stale copy would test old code.
    purelib = sysconfig.get_paths()["purelib"]
    for name in sorted(os.listdir(str(SOURCE / "overtime_worker"))):
        if not name.endswith(".py"):
            continue
        installed = os.path.join(purelib, "overtime_worker", name)
        assert os.path.isfile(installed), "{} is not installed: run scripts/setup".format(name)
        with open(installed, "rb") as a, open(str(SOURCE / "overtime_worker" / name), "rb") as b:
            assert hashlib.sha256(a.read()).digest() == hashlib.sha256(b.read()).digest(), \
                "the installed {} differs from the source: run scripts/setup".format(name)


PROBE = ("import sys, json\n"
         "loaded = lambda: {m: m in sys.modules for m in ('_overtime_worker_startup', 'overtime_worker', 'tqdm')}\n"
         "before = loaded()\n"
         "BODY\n"
         "print(json.dumps({'before': before, 'after': loaded()}))\n")


def probe(body="", fd_env=True, **env_extra):
    """Runs PROBE in a fresh venv interpreter (without the source on PYTHONPATH, so only
    the installed hook and package are in play); returns (modules loaded, lines sent)."""
    ours, theirs = socket.socketpair()
    env = clean_env(**env_extra)
    env.pop("PYTHONPATH", None)
    if fd_env:
        env.update(OVERTIME_FD=str(theirs.fileno()), OVERTIME_TASK="probe", OVERTIME_RUN="r")
    out = subprocess.run([PYTHON, "-c", PROBE.replace("BODY", body)], pass_fds=(theirs.fileno(),), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
    theirs.close()
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), read_messages(ours)


def test_without_overtime_the_hook_loads_nothing():
    modules, _ = probe("import tqdm", fd_env=False)
    assert modules["before"] == {"_overtime_worker_startup": False, "overtime_worker": False, "tqdm": False}
    assert modules["after"]["overtime_worker"] is False


def test_under_overtime_the_hook_waits_for_tqdm_and_imports_nothing_eagerly():
    modules, sent = probe("")
    assert modules["before"] == {"_overtime_worker_startup": True, "overtime_worker": False, "tqdm": False}
    assert sent == []


def test_an_unmodified_tqdm_loop_reports_through_the_hook():
    modules, sent = probe("from tqdm import tqdm\nimport time\n"
                          "for _ in tqdm(range(30), desc='Work'):\n    time.sleep(0.001)")
    assert modules["after"]["overtime_worker"] is True
    assert [m for m in sent if m["type"] == "progress"][-1] == {"type": "progress", "completed": 30, "total": 30, "title": "Work",
                                                                "bar": "tqdm-1", "closed": True}


def test_tqdm_auto_and_subclasses_report_too():
    _, sent = probe("from tqdm.auto import trange\n"
                    "for _ in trange(9, disable=True): pass")
    assert [m for m in sent if m["type"] == "progress"][-1]["completed"] == 9


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_the_bridges_can_be_turned_off(value):
    modules, sent = probe("from tqdm import tqdm\nfor _ in tqdm(range(5)): pass", OVERTIME_BRIDGE=value)
    assert modules["after"] == {"_overtime_worker_startup": False, "overtime_worker": False, "tqdm": True}
    assert sent == []


def test_the_tqdm_bridge_alone_can_be_turned_off():
    modules, sent = probe("from tqdm import tqdm\nfor _ in tqdm(range(5)): pass", OVERTIME_TQDM="0")
    assert modules["after"] == {"_overtime_worker_startup": True, "overtime_worker": False, "tqdm": True}
    assert sent == []


def test_a_bar_closed_while_the_task_is_cancelled_is_not_drawn_again(supervisor):
    screen = io.StringIO()
    drawn = None
    with pytest.raises(overtime_worker.Cancelled):
        with tqdm(total=10, desc="Tokenizing", file=screen, disable=False, mininterval=0) as bar:
            bar.update(4)
            drawn = screen.getvalue()
            supervisor.send({"type": "cancel", "reason": "timeout", "grace": 10})
            time.sleep(10)   # the cancel unwinds from here, and the with block closes the bar
    assert "4/10" in drawn
    assert screen.getvalue() == drawn, "tqdm would print the bar's last state again after Overtime's notice"
    assert last_progress(supervisor) == {"type": "progress", "completed": 4, "total": 10, "title": "Tokenizing",
                                         "closed": True}
    bar.close()   # a second close is harmless
