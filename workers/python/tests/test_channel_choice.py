"""Which channel a process uses: fd 3 when the supervisor (its parent) handed it over,
else its own connection to OVERTIME_SOCKET, else none. Real sockets, real processes."""

import json
import os
import socket
import subprocess
import threading

from conftest import PYTHON, clean_env, read_messages, task_socket_listener

WHICH = ("import overtime_worker as ot, json\n"
         "c = ot._channel\n"
         "print(json.dumps('none' if c is None else 'fd' if c.sock is None else 'socket'))\n"
         "ot.progress(completed=7, bar='x')\n")


class Listener(object):
    """OVERTIME_SOCKET's side: accepts every connection and keeps what each one sent."""

    def __init__(self):
        self.sock, self.name = task_socket_listener()
        self.connections = []
        self._threads = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            messages = []
            self.connections.append(messages)
            thread = threading.Thread(target=lambda: messages.extend(read_messages(conn)), daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self):
        for thread in list(self._threads):
            thread.join(10)
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        return self.connections


def run(source, fd=None, socket_env=True, shell=False, env_extra=None):
    """Runs `source` with (optionally) one end of a socketpair made here as OVERTIME_FD and
    a listener as OVERTIME_SOCKET; returns (stdout, lines sent on the fd, lines per
    connection to the listener)."""
    listener = Listener() if socket_env else None
    env = clean_env(OVERTIME_TASK="t", OVERTIME_RUN="r")
    if listener is not None:
        env["OVERTIME_SOCKET"] = listener.name
    env.update(env_extra or {})
    ours = theirs = None
    pass_fds = ()
    if fd == "socketpair":
        ours, theirs = socket.socketpair()
    elif fd == "datagram":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    if theirs is not None:
        env["OVERTIME_FD"] = str(theirs.fileno())
        pass_fds = (theirs.fileno(),)
    elif fd == "pipe":
        r, w = os.pipe()
        env["OVERTIME_FD"] = str(w)
        pass_fds = (w,)
    argv = [PYTHON, "-c", source]
    if shell:   # a grandchild: `; true` keeps sh from exec'ing python in its place
        argv = ["sh", "-c", '"$0" -c "$1"; true', PYTHON, source]
    child = subprocess.run(argv, pass_fds=pass_fds, env=env, stdout=subprocess.PIPE,
                           universal_newlines=True, timeout=20)
    assert child.returncode == 0, child
    sent_on_fd = []
    if theirs is not None:
        theirs.close()
        if fd == "socketpair":
            sent_on_fd = read_messages(ours)
        else:
            ours.close()
    elif fd == "pipe":
        os.close(w)
        os.close(r)
    per_connection = listener.close() if listener is not None else []
    return json.loads(child.stdout.splitlines()[0]), sent_on_fd, per_connection


def test_fd_3_from_the_parent_is_the_channel():
    which, on_fd, connections = run(WHICH, fd="socketpair")
    assert which == "fd"
    assert {"type": "progress", "completed": 7, "bar": "x"} in on_fd
    assert connections == []


def test_a_grandchild_with_the_fd_of_someone_else_connects_to_the_task_socket():
    # fd 3 is a stream socket whose peer is this test, not the grandchild's parent (sh).
    which, on_fd, connections = run(WHICH, fd="socketpair", shell=True)
    assert which == "socket"
    assert on_fd == []
    assert connections == [[{"type": "progress", "completed": 7, "bar": "x"}]]


def test_an_fd_that_is_a_pipe_or_a_datagram_socket_is_not_the_channel():
    for kind in ("pipe", "datagram"):
        which, _, connections = run(WHICH, fd=kind)
        assert which == "socket", kind
        assert len(connections) == 1, kind


def test_an_fd_of_another_socket_than_the_one_claimed_in_the_task_is_not_the_channel():
    # An ancestor recorded which socket it uses as fd 3; a socket its child made and handed
    # on as fd 3 (peer: the parent, but another socket) is not the task's.
    which, on_fd, _ = run(WHICH, fd="socketpair", env_extra={"_OVERTIME_WORKER_SOCKET": "r/t/1:2"})
    assert which == "socket" and on_fd == []


def test_without_either_there_is_no_channel():
    which, _, _ = run(WHICH, socket_env=False)
    assert which == "none"
    which, _, _ = run(WHICH, socket_env=False, fd="pipe")
    assert which == "none"
    which, _, _ = run(WHICH, socket_env=False, env_extra={"OVERTIME_SOCKET": "@nobody-listens-here"})
    assert which == "none"


def test_a_path_as_task_socket(tmp_path):
    path = str(tmp_path / "task.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    child = subprocess.Popen([PYTHON, "-c", WHICH], env=clean_env(OVERTIME_SOCKET=path), stdout=subprocess.PIPE,
                             universal_newlines=True)
    listener.settimeout(10)
    conn, _ = listener.accept()
    sent = read_messages(conn)
    out, _ = child.communicate(timeout=20)
    listener.close()
    assert json.loads(out) == "socket"
    assert sent == [{"type": "progress", "completed": 7, "bar": "x"}]


FORK = ("import os, json, overtime_worker as ot\n"
        "ot.progress(completed=1, bar='parent')\n"
        "ot.flush()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    lazy = ot._channel is None\n"
        "    ot.progress(completed=2, bar='child')\n"
        "    ok = lazy and ot._channel is not None and ot._channel.sock is not None\n"
        "    ot.flush()\n"
        "    os._exit(0 if ok else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(json.dumps(status))\n"
        "ot.progress(completed=3, bar='parent')\n")


def test_a_forked_child_connects_its_own_channel_on_first_use():
    status, on_fd, connections = run(FORK, fd="socketpair")
    assert status == 0
    assert [m["completed"] for m in on_fd] == [1, 3]
    assert connections == [[{"type": "progress", "completed": 2, "bar": "child"}]]


def test_cancel_reaches_a_process_on_the_task_socket():
    listener, name = task_socket_listener()
    source = ("import os, sys, time, overtime_worker as ot\n"
              "def stop(reason, grace):\n"
              "    print(reason, grace, ot.cancel_reason(), flush=True)\n"
              "    os._exit(0)\n"
              "ot.on_cancel(stop)\n"
              "ot.heartbeat()\n"
              "time.sleep(20)\n")
    child = subprocess.Popen([PYTHON, "-c", source], env=clean_env(OVERTIME_SOCKET=name), stdout=subprocess.PIPE,
                             universal_newlines=True)
    listener.settimeout(10)
    conn, _ = listener.accept()
    conn.settimeout(10)
    # The connection's first heartbeat says who it is (the process's pid: no RANK here).
    assert conn.recv(100) == '{{"type":"heartbeat","reporter":"pid {}"}}\n'.format(child.pid).encode()
    conn.sendall(b'{"type":"cancel","reason":"user","grace":4}\n')
    out, _ = child.communicate(timeout=20)
    conn.close()
    listener.close()
    assert out.strip() == "user 4.0 user"
