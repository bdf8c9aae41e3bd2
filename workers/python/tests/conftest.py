"""Shared fixtures: a fake supervisor on a socketpair, and the real `overtime run`."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
WORKERS = REPO / "workers"
FIXTURES = WORKERS / "fixtures"
SOURCE = WORKERS / "python"
PYTHON = sys.executable

# The real frameworks' tests run in a venv of their own (scripts/frameworks-venv), as a step
# of their own in scripts/test, with their own pytest.ini.
collect_ignore = ["frameworks"]

# The tests exercise the source tree, here and in every child they start (PYTHONPATH);
# the installed copy contributes only its .pth start-up hook.
sys.path.insert(0, str(SOURCE))
import overtime_worker  # noqa: E402


# The supervisors these tests start must begin as a shell's foreground command does, with
# SIGINT, SIGQUIT and SIGHUP at their defaults: Overtime leaves a signal it was started
# with ignored alone, and a test runner started in the background of a script (as CI may
# start it) has SIGINT and SIGQUIT ignored. A handled signal is reset by exec; so handle
# what is ignored here.
for _signal in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
    if signal.getsignal(_signal) == signal.SIG_IGN:
        signal.signal(_signal, signal.default_int_handler if _signal == signal.SIGINT else signal.SIG_DFL)


def clean_env(**extra):
    """The test's environment without anything of an Overtime the suite itself may run under."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OVERTIME_", "_OVERTIME_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SOURCE), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def take_reporter_names(messages, names):
    """Moves each message's ``reporter`` (the name a connection says once, with its first
    progress or heartbeat) into ``names``, so the tests compare what the messages report."""
    for message in messages:
        if "reporter" in message:
            names.append(message.pop("reporter"))
    return messages


class FakeSupervisor(object):
    """The supervisor's end of the channel: reads the task's lines, writes its own.
    ``reporter_names``: the names the channel said (test_module checks it says one, once)."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""
        self.received = []
        self.reporter_names = []

    def send(self, message):
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def _fill(self, timeout):
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(1 << 20)
        except socket.timeout:
            return False
        if not chunk:
            return False
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        self.received.extend(take_reporter_names([json.loads(line) for line in lines], self.reporter_names))
        return True

    def wait_for(self, predicate, timeout=5.0):
        """Reads until a message matching `predicate` arrives; returns it."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for message in self.received[seen:]:
                if predicate(message):
                    return message
            seen = len(self.received)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no matching message within {} s; got {}".format(timeout, self.received[-5:]))
            self._fill(min(left, 0.5))

    @contextlib.contextmanager
    def reading(self):
        """Reads in a thread of its own for the length of the block, as a supervisor does
        while its task writes."""
        stop = threading.Event()

        def read():
            while not stop.is_set():
                self._fill(0.1)

        reader = threading.Thread(target=read, name="fake-supervisor-reader", daemon=True)
        reader.start()
        try:
            yield
        finally:
            stop.set()
            reader.join(5)

    def drain(self, quiet=0.2):
        """Reads everything until the channel has been quiet for `quiet` seconds."""
        while self._fill(quiet):
            pass
        return self.received

    def of_type(self, kind):
        return [m for m in self.received if m.get("type") == kind]


_listeners = iter(range(1, 1 << 30))


def task_socket_listener():
    """A listening socket in Linux's abstract namespace, and its OVERTIME_SOCKET name."""
    name = "@overtime-worker-test-{}-{}".format(os.getpid(), next(_listeners))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name[1:])
    listener.listen(8)
    return listener, name


@pytest.fixture
def supervisor():
    """Puts overtime_worker under a fake supervisor for one test, and back outside after:
    the library connects to the fake's OVERTIME_SOCKET (fd 3 would have to come from this
    process's parent)."""
    listener, name = task_socket_listener()
    env = {"OVERTIME_SOCKET": name, "OVERTIME_TASK": "test", "OVERTIME_RUN": "run-1"}
    channel = overtime_worker._restart_for_tests(env)
    assert channel is not None
    listener.settimeout(5)
    ours, _ = listener.accept()
    listener.close()
    fake = FakeSupervisor(ours)
    fake.channel = channel
    try:
        yield fake
    finally:
        overtime_worker._restart_for_tests({})
        ours.close()                       # EOF: the reader thread ends
        channel._reader.join(5)
        channel._writer.join(5)
        channel._handler.join(5)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def outside_overtime_by_default():
    """Every test starts with the library outside Overtime, whatever runs the suite."""
    if overtime_worker.active():
        overtime_worker._restart_for_tests({})
    yield


class Run(object):
    def __init__(self, completed, started):
        self.code = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.seconds = time.monotonic() - started
        lines = [line for line in self.stdout.splitlines() if line.startswith('{"run":')]
        self.report = json.loads(lines[-1]) if lines else None

    def __repr__(self):
        return "exit {} after {:.2f} s\n--- stdout\n{}--- stderr\n{}".format(self.code, self.seconds, self.stdout, self.stderr)


class Overtime(object):
    """Runs commands under the real `overtime run --json --progress none`."""

    def __init__(self, binary):
        self.binary = binary

    def argv(self, options, command):
        return [self.binary, "run", "--json", "--progress", "none"] + list(options) + ["--"] + [str(c) for c in command]

    def run(self, options, command, timeout=60, env=None, cwd=None):
        started = time.monotonic()
        completed = subprocess.run(self.argv(options, command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   universal_newlines=True, timeout=timeout, env=env or clean_env(), cwd=cwd)
        return Run(completed, started)

    def start(self, options, command, env=None):
        return subprocess.Popen(self.argv(options, command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True, env=env or clean_env())


@pytest.fixture(scope="session")
def overtime():
    binary = os.environ.get("OVERTIME_BIN")
    if not binary:
        pytest.skip("OVERTIME_BIN is not set: point it at a built overtime binary "
                    "(scripts/test does) to run the tests under the real supervisor")
    if not os.access(binary, os.X_OK):
        pytest.fail("OVERTIME_BIN={} is not an executable file".format(binary))
    return Overtime(binary)


def read_messages(sock, timeout=10, reporter_names=None):
    """Reads `sock` to EOF, closes it; returns the JSON lines it carried (each reporter
    name moved into `reporter_names`)."""
    data = b""
    sock.settimeout(timeout)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    return take_reporter_names([json.loads(line) for line in data.splitlines()],
                               [] if reporter_names is None else reporter_names)


def start_child(source, env_extra=None):
    """Starts `source` in a fresh interpreter whose OVERTIME_FD is one end of a socketpair;
    returns (the child, with its stdout a pipe; the supervisor's end of the pair)."""
    ours, theirs = socket.socketpair()
    env = clean_env(OVERTIME_FD=str(theirs.fileno()), OVERTIME_TASK="child", OVERTIME_RUN="r")
    env.update(env_extra or {})
    child = subprocess.Popen([PYTHON, "-c", source], pass_fds=(theirs.fileno(),), env=env,
                             stdout=subprocess.PIPE, universal_newlines=True)
    theirs.close()
    return child, ours


def run_child(source, env_extra=None, timeout=20):
    """Runs `source` as ``start_child`` does, to its end; returns (exit code, stdout,
    everything it sent)."""
    child, ours = start_child(source, env_extra)
    out, _ = child.communicate(timeout=timeout)
    return child.returncode, out, read_messages(ours)


def per_bar(supervisor, kind):
    """bar id -> what the supervisor holds for it after every progress line so far
    (fields merged as it does), in the order the bars last moved. Every progress line must
    name a bar of `kind` ("tqdm", "rich")."""
    from overtime_worker._channel import merge_progress
    assert overtime_worker.flush(5)
    supervisor.drain(0.3)   # what the throttle deferred comes within 0.2 s
    assert overtime_worker.flush(5)
    supervisor.drain(0.1)
    bars = {}
    for message in supervisor.of_type("progress"):
        assert message.get("bar", "").startswith(kind + "-"), message
        state = bars.pop(message["bar"], {})
        merge_progress(state, message)
        bars[message["bar"]] = state
    return bars


def write_script(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(source)
    return path

