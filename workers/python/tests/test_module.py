"""overtime_worker alone, against a fake supervisor (conftest.py)."""

import ast
import os
import signal
import socket
import threading
import time

import pytest

import overtime_worker as ot
from conftest import REPO, WORKERS, run_child, task_socket_listener


# ---- outside Overtime ---------------------------------------------------------------------

def test_every_call_is_a_quiet_no_op_outside_overtime():
    assert not ot.active()
    assert ot.progress(completed=1, total=2, title="t", detail="d") is None
    assert ot.heartbeat() is None
    assert ot.ready() is None
    assert ot.result({"ok": True}) is None
    started = time.monotonic()
    assert ot.extend(60, why="x") is None
    assert time.monotonic() - started < 0.5
    assert ot.remaining() is None
    assert ot.cancel_reason() is None
    assert ot.memory_warning() is None
    assert ot.flush() is True
    assert list(ot.track(range(3), title="t")) == [0, 1, 2]
    handler = ot.on_cancel(lambda reason, grace: None)
    assert callable(handler) and ot.on_expiring(handler) is handler
    assert ot.on_memory_warning(handler) is handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_arguments_are_still_checked_outside_overtime():
    with pytest.raises(TypeError):
        ot.result(object())
    with pytest.raises(ValueError):
        ot.result(float("nan"))
    with pytest.raises(ValueError):
        ot.extend(0)
    with pytest.raises(ValueError):
        ot.extend(-5)


def test_a_descriptor_that_is_not_a_socket_is_not_a_channel(tmp_path):
    with open(tmp_path / "file", "w") as f:
        assert ot._restart_for_tests({"OVERTIME_FD": str(f.fileno())}) is None
    assert ot._restart_for_tests({"OVERTIME_FD": "not-a-number"}) is None
    assert ot._restart_for_tests({"OVERTIME_FD": "987"}) is None   # not open
    assert not ot.active()


# ---- sending --------------------------------------------------------------------------------

def test_progress_sends_the_fields_given(supervisor):
    ot.progress(completed=3, total=10, title="Resizing", detail="image-3.jpg")
    message = supervisor.wait_for(lambda m: m["type"] == "progress")
    assert message == {"type": "progress", "completed": 3, "total": 10, "title": "Resizing", "detail": "image-3.jpg"}
    ot.progress(fraction=0.25)
    assert supervisor.wait_for(lambda m: "fraction" in m) == {"type": "progress", "fraction": 0.25}


def test_a_connection_says_who_it_is_once(supervisor):
    for step in range(5):
        ot.progress(completed=step, total=5)
        assert ot.flush(5)
    ot.heartbeat()
    assert ot.flush(5)
    supervisor.drain(0.2)
    assert supervisor.reporter_names == ["pid {}".format(os.getpid())]


@pytest.mark.parametrize("environ, name", [
    ({"RANK": "3", "LOCAL_RANK": "1"}, "rank 3"),      # torchrun, DeepSpeed, Accelerate
    ({"LOCAL_RANK": "1"}, "local rank 1"),
    ({"RANK": "x"}, "pid"),      # not a rank: the pid
    ({}, "pid"),
])
def test_the_reporter_name_is_the_rank_else_the_pid(environ, name):
    from overtime_worker._channel import reporter_name
    assert reporter_name(environ) == (name if name != "pid" else "pid {}".format(os.getpid()))


def test_closed_says_a_bar_is_finished_and_a_later_update_opens_it_again(supervisor):
    from overtime_worker._channel import merge_progress
    ot.progress(completed=4, total=4, bar="load", closed=True)
    assert supervisor.wait_for(lambda m: m["type"] == "progress") == {"type": "progress", "completed": 4, "total": 4,
                                                                      "bar": "load", "closed": True}
    pending = {"completed": 4, "closed": True}
    merge_progress(pending, {"completed": 5})
    assert pending == {"completed": 5}


def test_progress_values_are_made_valid_for_the_protocol(supervisor):
    ot.progress(completed=7.9, total=-3, fraction=1.5, title="x" * 10000, detail="caf\udce9")
    message = supervisor.wait_for(lambda m: m["type"] == "progress")
    assert message["completed"] == 7 and message["total"] == 0 and message["fraction"] == 1.0
    assert len(message["title"]) == 4096
    assert message["detail"] == "caf?"   # a lone surrogate would be a protocol error
    with pytest.raises(TypeError):
        ot.progress(completed="three")
    with pytest.raises(TypeError):
        ot.progress(fraction="half")


def test_heartbeat_and_empty_progress_are_heartbeats(supervisor):
    ot.heartbeat()
    assert supervisor.wait_for(lambda m: m["type"] == "heartbeat") == {"type": "heartbeat"}
    supervisor.received.clear()
    ot.progress()
    supervisor.wait_for(lambda m: m["type"] == "heartbeat")


def test_ready_and_result(supervisor):
    ot.ready()
    ot.result({"loss": 0.125, "name": "résumé", "list": [1, None, True]})
    assert supervisor.wait_for(lambda m: m["type"] == "ready") == {"type": "ready"}
    assert supervisor.wait_for(lambda m: m["type"] == "result")["value"] == {
        "loss": 0.125, "name": "résumé", "list": [1, None, True]}


def test_a_result_too_long_for_one_line_is_refused(supervisor):
    with pytest.raises(ValueError, match="64 KiB|65536"):
        ot.result("x" * 70000)
    ot.result("x" * 60000)   # fits
    assert len(supervisor.wait_for(lambda m: m["type"] == "result")["value"]) == 60000


def test_a_tight_loop_of_progress_is_coalesced_and_the_last_value_wins(supervisor):
    n = 100000
    started = time.monotonic()
    for i in range(1, n + 1):
        ot.progress(completed=i, total=n)
    spent = time.monotonic() - started
    assert ot.flush(5)
    progress = [m for m in supervisor.drain() if m["type"] == "progress"]
    assert progress[-1] == {"type": "progress", "completed": n, "total": n}
    assert len(progress) < n / 10, "{} lines for {} calls".format(len(progress), n)
    completed = [m["completed"] for m in progress]
    assert completed == sorted(completed)
    assert spent < 5, "100000 calls took {:.2f} s".format(spent)


def test_coalesced_progress_keeps_every_field_and_never_blocks(supervisor):
    # Fill the socket so the writer is stuck, as with a supervisor that does not read.
    big = "y" * 60000
    for _ in range(12):
        ot.result(big)
    time.sleep(0.3)
    started = time.monotonic()
    ot.progress(fraction=0.5)
    ot.progress(title="Epoch 1")
    ot.progress(completed=5, total=10)          # replaces the fraction, as at the supervisor
    ot.progress(detail="batch 5")
    ot.heartbeat()
    ot.ready()                                   # never dropped, even while the writer is stuck
    ot.result({"final": True})
    assert time.monotonic() - started < 0.5, "calls blocked while the supervisor was not reading"
    supervisor.wait_for(lambda m: m.get("value") == {"final": True}, timeout=10)
    supervisor.drain()
    results = supervisor.of_type("result")
    assert len(results) == 13 and results[-1]["value"] == {"final": True}
    assert supervisor.of_type("ready") == [{"type": "ready"}]
    progress = supervisor.of_type("progress")
    assert progress[-1] == {"type": "progress", "title": "Epoch 1", "completed": 5, "total": 10, "detail": "batch 5"}
    assert len(progress) <= 2
    # Coalescing keeps the order of calls: the progress went before ready and the result.
    kinds = [m["type"] for m in supervisor.received]
    assert kinds[-3:] == ["progress", "ready", "result"]


def test_calls_from_many_threads(supervisor):
    def work(k):
        for i in range(2000):
            ot.progress(completed=i, total=2000, detail="thread {}".format(k))
            if i % 500 == 0:
                ot.heartbeat()
        ot.result(k)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    # The fake reads while the threads send, as a supervisor does: a socket holds only so
    # much unread, and a writer blocked on a full one would never flush (in CI it did not).
    with supervisor.reading():
        for t in threads:
            t.join()
        # A generous bound: under four test workers on two cores 5 s was once too short.
        assert ot.flush(30)
    supervisor.drain()
    assert sorted(m["value"] for m in supervisor.of_type("result")) == list(range(8))


def test_track_reports_each_item_and_the_end(supervisor):
    seen = []
    for item in ot.track(["a", "b", "c"], title="Letters"):
        seen.append(item)
    assert seen == ["a", "b", "c"]
    last = supervisor.wait_for(lambda m: m.get("completed") == 3)
    assert last == {"type": "progress", "completed": 3, "total": 3, "title": "Letters"}


def test_track_without_a_length_and_when_left_early(supervisor):
    for item in ot.track((i for i in range(100)), title="Stream"):
        if item == 9:
            break
    last = supervisor.wait_for(lambda m: m.get("completed") == 9)
    assert "total" not in last


# ---- budget -------------------------------------------------------------------------------

def answer_extends(supervisor, replies):
    """Answers each extend request, in order, with the next budget reply."""
    def run():
        for reply in replies:
            supervisor.wait_for(lambda m: m["type"] == "extend" and not m.get("_answered"))
            for m in supervisor.received:
                if m["type"] == "extend" and not m.get("_answered"):
                    m["_answered"] = True
                    break
            supervisor.send(reply)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_extend_waits_for_the_reply_to_it(supervisor):
    supervisor.send({"type": "budget", "remaining": 30})          # the start budget is no reply
    thread = answer_extends(supervisor, [{"type": "budget", "remaining": 42.5, "granted": True}])
    assert ot.extend(40, why="compacting") == 42.5
    thread.join(5)
    request = supervisor.of_type("extend")[0]
    assert request["seconds"] == 40 and request["why"] == "compacting"
    assert 41 < ot.remaining() <= 42.5


def test_extend_when_clipped_or_unlimited(supervisor):
    thread = answer_extends(supervisor, [{"type": "budget", "remaining": 3.25, "granted": False},
                                         {"type": "budget", "remaining": None, "granted": True}])
    assert ot.extend(600) == 3.25
    assert ot.extend(600) is None     # no limit
    thread.join(5)
    assert ot.remaining() is None


def test_extend_without_an_answer_returns_the_latest_budget_after_its_timeout(supervisor):
    supervisor.send({"type": "budget", "remaining": 20})
    supervisor.sock.settimeout(None)
    time.sleep(0.2)
    started = time.monotonic()
    left = ot.extend(60, timeout=0.3)
    assert 0.25 < time.monotonic() - started < 3
    assert 15 < left <= 20


def test_extend_returns_at_once_when_the_supervisor_is_gone(supervisor):
    supervisor.sock.shutdown(socket.SHUT_RDWR)
    time.sleep(0.2)
    started = time.monotonic()
    ot.extend(60, timeout=5)
    ot.progress(completed=1)
    ot.result("still fine")
    assert time.monotonic() - started < 1


def test_remaining_counts_down_from_the_last_budget(supervisor):
    assert ot.remaining() is None
    supervisor.send({"type": "budget", "remaining": 10})
    deadline = time.monotonic() + 5
    while ot.remaining() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    first = ot.remaining()
    time.sleep(0.3)
    assert 9 < first <= 10 and ot.remaining() <= first - 0.25


# ---- expiring and cancel ----------------------------------------------------------------

def test_on_expiring_runs_the_handler_off_the_main_thread_and_it_may_extend(supervisor):
    calls = []
    done = threading.Event()

    @ot.on_expiring
    def handler(remaining):
        calls.append((remaining, threading.current_thread() is threading.main_thread()))
        calls.append(ot.extend(30))
        done.set()

    thread = answer_extends(supervisor, [{"type": "budget", "remaining": 30, "granted": True}])
    supervisor.send({"type": "expiring", "remaining": 4.5})
    assert done.wait(5)
    thread.join(5)
    assert calls == [(4.5, False), 30]


def test_cancel_raises_cancelled_in_the_main_thread_with_its_reason(supervisor):
    assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
    cleaned = []

    def supervisor_cancels():
        time.sleep(0.2)
        supervisor.send({"type": "cancel", "reason": "user", "grace": 7})
        os.kill(os.getpid(), signal.SIGTERM)        # as Overtime does, right after the message

    threading.Thread(target=supervisor_cancels).start()
    started = time.monotonic()
    with pytest.raises(ot.Cancelled) as caught:
        try:
            time.sleep(30)                           # C code: the signal interrupts it
        finally:
            cleaned.append(True)
    assert time.monotonic() - started < 5
    assert caught.value.reason == "user" and caught.value.grace == 7
    assert "user" in str(caught.value)
    assert cleaned == [True]
    assert ot.cancel_reason() == "user"
    assert not isinstance(caught.value, Exception), "a broad `except Exception` must not swallow it"
    os.kill(os.getpid(), signal.SIGTERM)              # a second SIGTERM does not cut cleanup short
    time.sleep(0.1)


@pytest.mark.parametrize("reason", ["timeout", "deadline", "revoked", "shutdown", "memory", "fail-fast"])
def test_every_reason_reaches_the_exception(supervisor, reason):
    supervisor.send({"type": "cancel", "reason": reason, "grace": 2.5})
    time.sleep(0.1)
    with pytest.raises(ot.Cancelled) as caught:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert (caught.value.reason, caught.value.grace) == (reason, 2.5)


def test_sigterm_while_the_main_thread_holds_the_channel_lock_still_gets_the_reason(supervisor):
    # A loop that reports progress often is, as often as not, inside the channel's lock
    # (queueing its progress) when SIGTERM's handler runs there. The lines before the
    # cancel (here an `expiring`) and the cancel itself must still reach the handler.
    with pytest.raises(ot.Cancelled) as caught:
        with supervisor.channel._lock:
            supervisor.send({"type": "expiring", "remaining": 5})
            supervisor.send({"type": "cancel", "reason": "shutdown", "grace": 9})
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert (caught.value.reason, caught.value.grace) == ("shutdown", 9)
    assert ot.cancel_reason() == "shutdown"
    # Once the lock is free, the handler acts on both lines as before.
    deadline = time.monotonic() + 5
    while supervisor.channel.cancel is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert supervisor.channel.cancel == ("shutdown", 9)


def test_a_sigterm_another_thread_took_still_interrupts_the_main_thread(supervisor):
    # The kernel hands a signal sent to the process to any thread that will take it, and
    # CPython runs the handler only when the main thread next runs Python code: without
    # the library's own SIGTERM to the main thread, this sleep would last its 30 s.
    def supervisor_cancels():
        time.sleep(0.2)
        supervisor.send({"type": "cancel", "reason": "shutdown", "grace": 9})
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)   # taken here, not by main

    threading.Thread(target=supervisor_cancels).start()
    started = time.monotonic()
    with pytest.raises(ot.Cancelled) as caught:
        time.sleep(30)
    assert time.monotonic() - started < 15
    assert (caught.value.reason, caught.value.grace) == ("shutdown", 9)


def test_sigterm_without_a_cancel_message(supervisor):
    started = time.monotonic()
    with pytest.raises(ot.Cancelled) as caught:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert caught.value.reason == "signal" and caught.value.grace is None
    assert time.monotonic() - started < 3


def stuck_in_c_code(event):
    event.wait(30)


def test_a_timeout_cancel_writes_every_stack_first(supervisor, capsys):
    parked = threading.Event()
    helper = threading.Thread(target=stuck_in_c_code, args=(parked,), name="loader")
    helper.start()
    try:
        with pytest.raises(ot.Cancelled):
            supervisor.send({"type": "cancel", "reason": "timeout", "grace": 5})
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    finally:
        parked.set()
        helper.join()
    err = capsys.readouterr().err
    assert "cancelled for timeout" in err
    assert 'Thread "MainThread"' in err and "test_a_timeout_cancel_writes_every_stack_first" in err
    assert 'Thread "loader"' in err and "stuck_in_c_code" in err
    assert "overtime-reader" not in err and "_channel.py" not in err


def test_other_reasons_write_no_stacks(supervisor, capsys):
    with pytest.raises(ot.Cancelled):
        supervisor.send({"type": "cancel", "reason": "user", "grace": 5})
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert "Thread" not in capsys.readouterr().err


def test_on_cancel_handlers_get_reason_and_grace(supervisor):
    got = []
    done = threading.Event()

    @ot.on_cancel
    def handler(reason, grace):
        got.append((reason, grace, threading.current_thread() is threading.main_thread()))
        done.set()

    supervisor.send({"type": "cancel", "reason": "revoked", "grace": 3})
    assert done.wait(5)
    assert got == [("revoked", 3.0, False)]
    late = threading.Event()
    ot.on_cancel(lambda reason, grace: late.set())    # registered after the cancel: runs at once
    assert late.wait(5)
    assert ot.cancel_reason() == "revoked"


# ---- memory warning -----------------------------------------------------------------------

GIB = 1 << 30


def test_on_memory_warning_runs_off_the_main_thread_and_may_block_to_checkpoint(supervisor):
    calls = []
    checkpointing = threading.Event()
    checkpoint_written = threading.Event()

    @ot.on_memory_warning
    def checkpoint(used, limit):
        calls.append((used, limit, threading.current_thread() is threading.main_thread()))
        checkpointing.set()
        # A checkpoint takes a while; the reader goes on meanwhile, so an extend asked for
        # from the handler is answered.
        time.sleep(0.3)
        calls.append(ot.extend(120, why="writing a checkpoint"))
        checkpoint_written.set()

    assert checkpoint is not None and callable(checkpoint)
    thread = answer_extends(supervisor, [{"type": "budget", "remaining": 120, "granted": True}])
    supervisor.send({"type": "warning", "resource": "memory", "used": 9 * GIB, "limit": 10 * GIB})
    assert checkpointing.wait(5)
    assert ot.memory_warning() == (9 * GIB, 10 * GIB)
    supervisor.send({"type": "budget", "remaining": 42})
    deadline = time.monotonic() + 5
    while not (ot.remaining() or 0) > 41 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 41 < ot.remaining() <= 42, "the reader heard the budget while the handler was still busy"
    assert not checkpoint_written.is_set()
    assert checkpoint_written.wait(5)
    thread.join(5)
    assert calls == [(9 * GIB, 10 * GIB, False), 120]


def test_a_memory_warning_handler_registered_after_the_warning_runs_at_once(supervisor):
    early = []
    early_called = threading.Event()
    ot.on_memory_warning(lambda used, limit: (early.append((used, limit)), early_called.set()))
    supervisor.send({"type": "warning", "resource": "memory", "used": 950, "limit": 1000})
    assert early_called.wait(5)
    late = []
    late_called = threading.Event()
    ot.on_memory_warning(lambda used, limit: (late.append((used, limit)), late_called.set()))
    assert late_called.wait(5)
    # Everything the dispatcher was given has run once the flush marker has.
    flushed = threading.Event()
    ot.on_memory_warning(lambda used, limit: flushed.set())
    assert flushed.wait(5)
    assert early == [(950, 1000)] and late == [(950, 1000)]


def test_a_memory_warning_that_is_not_one_is_ignored(supervisor):
    calls = []
    called = threading.Event()

    @ot.on_memory_warning
    def handler(used, limit):
        calls.append((used, limit))
        called.set()

    for line in [
        {"type": "warning", "resource": "gpu-memory", "used": 1, "limit": 2},   # not ours to handle
        {"type": "warning", "used": 1, "limit": 2},
        {"type": "warning", "resource": "memory", "limit": 2},
        {"type": "warning", "resource": "memory", "used": 1},
        {"type": "warning", "resource": "memory", "used": -1, "limit": 2},
        {"type": "warning", "resource": "memory", "used": 1, "limit": "2"},
        {"type": "warning", "resource": "memory", "used": True, "limit": 2},
        {"type": "warning", "resource": "memory", "used": None, "limit": 2},
    ]:
        supervisor.send(line)
    supervisor.sock.sendall(b'{"type":"warning","resource":"memory","used":NaN,"limit":2}\n')
    supervisor.send({"type": "warning", "resource": "memory", "used": 1.0, "limit": 2e9})
    assert called.wait(5)
    # The dispatcher runs handlers in the order the lines came: a bad line taken for a
    # warning would have been called first.
    assert calls == [(1, 2000000000)]
    assert ot.memory_warning() == (1, 2000000000)
    assert all(isinstance(n, int) for n in ot.memory_warning())


def test_a_memory_cancel_after_the_warning_reaches_the_exception(supervisor):
    warned = threading.Event()
    ot.on_memory_warning(lambda used, limit: warned.set())
    supervisor.send({"type": "warning", "resource": "memory", "used": 900, "limit": 1000})
    assert warned.wait(5)
    supervisor.send({"type": "cancel", "reason": "memory", "grace": 4})
    time.sleep(0.1)
    with pytest.raises(ot.Cancelled) as caught:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert (caught.value.reason, caught.value.grace) == ("memory", 4)
    assert ot.cancel_reason() == "memory"
    assert ot.memory_warning() == (900, 1000)


def test_a_program_with_its_own_sigterm_handler_keeps_it():
    listener, name = task_socket_listener()
    def mine(signum, frame):
        pass
    signal.signal(signal.SIGTERM, mine)
    channel = None
    try:
        channel = ot._restart_for_tests({"OVERTIME_SOCKET": name})
        assert channel is not None
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        ot._restart_for_tests({})
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        listener.close()   # the connection it had not accepted is reset: EOF
        if channel is not None:
            channel._reader.join(5)


def test_bad_lines_from_the_supervisor_are_ignored(supervisor):
    supervisor.sock.sendall(b"garbage\n[1]\n{\"type\":\"budget\"}\n{\"type\":\"warp\"}\n\xff\n")
    supervisor.send({"type": "budget", "remaining": 12})
    deadline = time.monotonic() + 5
    while ot.remaining() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 11 < ot.remaining() <= 12


# ---- processes ----------------------------------------------------------------------------

def test_what_is_sent_right_before_exit_is_not_lost():
    code, _, sent = run_child("import overtime_worker as ot\n"
                              "for i in range(1000): ot.progress(completed=i, total=1000)\n"
                              "ot.result({'done': True})\n")
    assert code == 0
    assert {"type": "result", "value": {"done": True}} in sent
    assert [m for m in sent if m["type"] == "progress"][-1]["completed"] == 999


def test_a_forked_child_stays_quiet_and_dies_of_sigterm_the_default_way():
    code, out, sent = run_child(
        "import os, signal, time, overtime_worker as ot\n"
        "ot.progress(completed=1)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ot.progress(completed=999)\n"
        "    ok = not ot.active() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL\n"
        "    os._exit(0 if ok else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status) if hasattr(os, 'waitstatus_to_exitcode') else status >> 8)\n"
        "ot.result('parent')\n")
    assert code == 0 and out.strip() == "0"
    assert all(m.get("completed") != 999 for m in sent)
    assert sent[-1] == {"type": "result", "value": "parent"}


def test_the_package_and_examples_parse_as_python_3_8():
    files = list((REPO / "workers" / "python").rglob("*.py")) + list(WORKERS.glob("*/*.py"))
    assert len(files) > 8
    for path in files:
        if "/build/" in str(path):
            continue
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))
