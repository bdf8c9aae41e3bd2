"""The channel to the supervisor: fd 3, a writer thread, a reader thread, callbacks.

Everything here is internal; the public API is in ``overtime_worker/__init__.py``.

Threads (all daemon threads, all named ``overtime-*``):

- the *writer* sends what the job queued. Callers never touch the socket: they drop their
  message into the outbox (must-deliver messages: ``extend``, ``result``, ``ready``) or
  into the progress slot (latest wins, fields merged) and return at once. A slow
  supervisor stalls only the writer, never the job. The merged progress goes out in the
  order of its latest update among the outbox's messages.
- the *reader* reads the supervisor's lines and takes no lock: it records a ``cancel`` the
  moment it reads it (``cancel_received``, ``cancel_seen``) and passes every line on to
  the *handler*. The SIGTERM handler waits for that record in the main thread, which may
  have been holding the channel's lock when the signal came (queueing progress, say), so
  nothing on the way to it may wait for that lock. On a ``timeout`` cancel the reader
  writes the stack of every thread to stderr first of all, so a job stuck in C code
  (``time.sleep``, a socket read) still says where it was.
- the *handler* acts on ``budget``, ``expiring``, ``warning`` and ``cancel`` lines under
  the lock: replies to ``extend``, handlers to call. It starts with the others, not at the
  first line: a thread created as SIGTERM arrives can take the signal from the sleeping
  main thread (see SigtermBridge).
- the *dispatcher* runs ``on_cancel``, ``on_expiring``, ``on_memory_warning`` and
  ``on_checkpoint_advice`` handlers,
  so a handler may block (write a checkpoint) or call ``extend()`` without holding up the
  reader.
"""

import collections
import json
import os
import queue
import signal
import socket
import stat
import struct
import sys
import threading
import time
import traceback

# The protocol's line limit (docs/protocol.md), not counting the newline.
MAX_LINE = 64 * 1024
# Strings in progress messages are cut to this many characters: a title or detail is a
# line on a screen, and a runaway one must not cost a protocol error.
MAX_TEXT = 4096
# Within how long after SIGTERM the cancel message is expected: the supervisor writes it
# before it signals, so it is normally there already.
CANCEL_MESSAGE_WAIT = 1.0
# Within how long after the cancel message the SIGTERM handler is expected to have run in the
# main thread; past it the library signals the main thread itself (see SigtermBridge).
SIGTERM_HANDLER_WAIT = 0.2

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# Message type -> function(channel, message) for the handler thread to call, for the
# messages another module of the package handles (``advice``: _phases).
MESSAGE_LISTENERS = {}
_HEARTBEAT_LINE = b'{"type":"heartbeat"}\n'


class Cancelled(BaseException):
    """Raised in the main thread when Overtime cancels the job.

    Overtime writes ``cancel`` on fd 3 and then sends SIGTERM; the library turns that into
    this exception, raised wherever the main thread is (a ``time.sleep`` or a blocking
    read is interrupted), so ``with`` blocks and ``finally`` clauses clean up within the
    grace period. It derives from ``BaseException``, like ``KeyboardInterrupt``, so that a
    broad ``except Exception:`` in the job does not swallow it.

    Attributes:
        reason: why: ``'timeout'`` (progress stopped), ``'deadline'`` (max-runtime),
            ``'revoked'``, ``'user'`` (an operator, Ctrl-C), ``'shutdown'`` (the
            supervisor is stopping), ``'memory'`` (the job's memory reached
            ``--memory-max``), ``'fail-fast'`` (another task of the batch failed
            under ``overtime batch --fail-fast``); any other word a newer Overtime sends
            is passed on as it is; ``'signal'`` when SIGTERM came without a cancel
            message (someone else sent it).
        grace: seconds until SIGKILL, as the supervisor said; None when unknown.
    """

    def __init__(self, reason, grace=None):
        super().__init__(reason, grace)
        self.reason = reason
        self.grace = grace

    def __str__(self):
        if self.grace is None:
            return "cancelled ({})".format(self.reason)
        return "cancelled by Overtime ({}); {:g} s of grace before SIGKILL".format(self.reason, self.grace)


def _seconds(value):
    """A number of seconds from the wire, or None (null, absent, or not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _size(value):
    """A number of bytes from the wire, or None (absent, negative, or not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (0 <= value < float("inf")):
        return None   # NaN and infinity: json.loads reads them, no supervisor sends them
    return int(value) if value >= 0 else None


def encode(message):
    """One protocol line for ``message`` (a dict), newline included.

    Lone surrogates (file names decoded with surrogateescape) become '?', because the
    supervisor rejects them; NaN and infinity raise ValueError, as JSON has neither.
    """
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8", "replace") + b"\n"


def merge_progress(pending, newer):
    """Folds ``newer`` into ``pending`` so that sending the result once has the effect of
    sending both in turn (the supervisor keeps fields left out, a message with
    ``completed`` or ``total`` replaces ``fraction``, and a bar that moves after it
    closed is open again)."""
    if "completed" in newer or "total" in newer:
        pending.pop("fraction", None)
    if "closed" not in newer:
        pending.pop("closed", None)
    pending.update(newer)


def reporter_name(environ=None):
    """Who this process is, as its connection tells the supervisor: ``rank R`` from
    ``RANK`` (torchrun, DeepSpeed, Accelerate set it in every rank), else ``local rank R``
    from ``LOCAL_RANK``, else ``pid N``. The supervisor shows and compares reporters by
    it; each connection says it once, with its first progress or heartbeat."""
    environ = os.environ if environ is None else environ
    for variable, label in (("RANK", "rank"), ("LOCAL_RANK", "local rank")):
        value = environ.get(variable, "").strip()
        if value.isdigit():
            return "{} {}".format(label, int(value))
    return "pid {}".format(os.getpid())


class _ExtendWaiter(object):
    __slots__ = ("event", "remaining", "replied")

    def __init__(self):
        self.event = threading.Event()
        self.remaining = None
        self.replied = False


class Channel(object):
    """This process's end of a socket to the supervisor: fd 3, or its own connection to
    OVERTIME_SOCKET (``sock``, kept here so that it stays open). One per process."""

    def __init__(self, fd, sock=None, name=None):
        self.fd = fd
        self.sock = sock
        self._name = name                              # said with the first progress or heartbeat
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)   # the writer waits here
        self._idle = threading.Condition(self._lock)   # flush() waits here
        self._outbox = collections.deque()             # encoded lines that must all go
        self._progress = {}                            # bar -> merged fields, latest wins
        self._progress_at = {}                         # bar -> its place in the outbox: after
                                                       # what was queued before its latest update
        self._heartbeat = False
        self._sending = False
        self._closed = False                           # no more writing (broken or shut)
        self._eof = False                              # the supervisor's side is gone
        self._waiters = collections.deque()            # extend() calls awaiting replies
        self._budget = None                            # (remaining or None, monotonic time)
        self.cancel = None                             # (reason, grace) once the handler acted on it
        self.cancel_received = None                    # the same, set earlier by the reader, lock-free
        self.cancel_seen = threading.Event()           # set with cancel_received
        self.memory_warning = None                     # (used, limit) bytes once warned
        self._cancel_handlers = []
        self._expiring_handlers = []
        self._memory_warning_handlers = []
        self._calls = queue.Queue()
        self._dispatcher = None
        self._inbox = queue.SimpleQueue()              # reader -> handler: messages, None at EOF
        # Called on the handler thread after a cancel (SigtermBridge.after_cancel). Not an
        # on_cancel handler: those wait behind the program's own on a thread made at the
        # first cancel, and a thread made as SIGTERM arrives is what can take it.
        self.after_cancel = None
        self._writer = threading.Thread(target=self._write_loop, name="overtime-writer", daemon=True)
        self._reader = threading.Thread(target=self._read_loop, name="overtime-reader", daemon=True)
        self._handler = threading.Thread(target=self._handle_loop, name="overtime-handler", daemon=True)

    def start(self):
        self._writer.start()
        self._reader.start()
        self._handler.start()

    # ---- sending -----------------------------------------------------------------------

    def send_line(self, line, waiter=None):
        """Queues a must-deliver line (and the extend waiter for its reply, in order)."""
        with self._lock:
            if self._closed:
                return False
            self._outbox.append(line)
            if waiter is not None:
                self._waiters.append(waiter)
            self._work.notify()
            return True

    def send_progress(self, fields):
        with self._lock:
            if self._closed:
                return
            bar = fields.get("bar")
            self._progress_at[bar] = len(self._outbox)
            pending = self._progress.pop(bar, None)   # popped and put back: latest last
            if pending is None:
                if not self._progress:
                    self._work.notify()
                self._progress[bar] = fields
            else:
                merge_progress(pending, fields)
                self._progress[bar] = pending

    def send_heartbeat(self):
        with self._lock:
            if self._closed or self._heartbeat:
                return
            self._heartbeat = True
            self._work.notify()

    def flush(self, timeout):
        """Waits until everything queued so far is written (or the channel is closed)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._closed and (self._outbox or self._progress
                                        or self._heartbeat or self._sending):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    def _write_loop(self):
        while True:
            with self._lock:
                while not (self._outbox or self._progress or self._heartbeat or self._closed):
                    self._work.wait()
                if self._closed:
                    self._idle.notify_all()
                    return
                lines = list(self._outbox)
                self._outbox.clear()
                progress, self._progress = self._progress, {}
                at, self._progress_at = self._progress_at, {}
                # A progress message counts as a heartbeat: one of the two is enough.
                heartbeat = self._heartbeat and not progress
                self._heartbeat = False
                self._sending = True
            name, self._name = self._name, None
            if progress:
                # Each bar's message goes where its latest update came among the outbox's
                # lines; bars at the same place in the order of their latest updates.
                for bar in reversed(list(progress)):
                    fields = progress[bar]
                    fields["type"] = "progress"
                    if name is not None:
                        fields["reporter"] = name
                        name = None
                    lines.insert(at[bar], encode(fields))
            if heartbeat:
                lines.append(_HEARTBEAT_LINE if name is None else encode({"type": "heartbeat", "reporter": name}))
            elif name is not None:
                self._name = name   # nothing that carries it went: the next one will
            try:
                self._write_all(b"".join(lines))
            except OSError:
                # The supervisor is gone (EPIPE) or fd 3 was closed under us: from now on
                # every call is a no-op, and nobody waits for a reply that cannot come.
                self._close_for_writing()
                return
            finally:
                with self._lock:
                    self._sending = False
                    if not (self._outbox or self._progress or self._heartbeat):
                        self._idle.notify_all()

    def _write_all(self, data):
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:
                # fd 3 was left non-blocking by someone: wait until it takes more.
                import select
                select.select([], [self.fd], [], 1.0)
                continue
            view = view[written:]

    def _close_for_writing(self):
        with self._lock:
            self._closed = True
            waiters = list(self._waiters)
            self._waiters.clear()
            self._work.notify_all()
            self._idle.notify_all()
        for waiter in waiters:
            waiter.event.set()

    def shutdown(self):
        """Stops the writer (for tests and fork children); the reader ends at EOF."""
        self._close_for_writing()

    # ---- budget ------------------------------------------------------------------------

    def extend(self, seconds, why, timeout):
        message = {"type": "extend", "seconds": seconds}
        if why is not None:
            message["why"] = str(why)[:MAX_TEXT]
        waiter = _ExtendWaiter()
        if not self.send_line(encode(message), waiter) or self._eof:
            return self.remaining()
        waiter.event.wait(timeout)
        # No reply (timed out, or the supervisor went away): the latest budget known.
        return waiter.remaining if waiter.replied else self.remaining()

    def remaining(self):
        budget = self._budget
        if budget is None:
            return None
        remaining, at = budget
        if remaining is None:
            return None
        return max(0.0, remaining - (time.monotonic() - at))

    # ---- handlers ----------------------------------------------------------------------

    def add_cancel_handler(self, handler):
        with self._lock:
            self._cancel_handlers.append(handler)
            cancel = self.cancel
        if cancel is not None:
            self._dispatch(handler, cancel)

    def add_expiring_handler(self, handler):
        with self._lock:
            self._expiring_handlers.append(handler)

    def add_memory_warning_handler(self, handler):
        # Under the lock the reader records the warning under: a handler added as the
        # warning arrives is called once, by one side or the other.
        with self._lock:
            self._memory_warning_handlers.append(handler)
            warning = self.memory_warning
        if warning is not None:
            self._dispatch(handler, warning)

    def _dispatch(self, handler, args):
        with self._lock:
            if self._dispatcher is None:
                self._dispatcher = threading.Thread(target=self._dispatch_loop, name="overtime-callbacks", daemon=True)
                self._dispatcher.start()
        self._calls.put((handler, args))

    def _dispatch_loop(self):
        while True:
            handler, args = self._calls.get()
            try:
                handler(*args)
            except BaseException:
                sys.stderr.write("overtime_worker: a handler raised an exception:\n")
                traceback.print_exc()
                try:
                    sys.stderr.flush()
                except Exception:
                    pass

    # ---- reading -----------------------------------------------------------------------

    def _read_loop(self):
        pending = b""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            pending += chunk
            if b"\n" not in chunk:
                if len(pending) > MAX_LINE + 1:
                    pending = b""   # a line no supervisor would send; skip it
                continue
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._receive_line(line)
        if pending:
            self._receive_line(pending)
        self._inbox.put(None)

    def _receive_line(self, line):
        """Decodes a line on the reader thread, records a cancel at once, and passes the
        message on. Takes no lock (see the module's docstring)."""
        try:
            message = json.loads(line.decode("utf-8"))
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if message.get("type") == "cancel" and self.cancel_received is None:
            reason = message.get("reason")
            reason = reason if isinstance(reason, str) else "unknown"
            if reason == "timeout":
                dump_stacks("overtime_worker: cancelled for timeout: no progress came in time. "
                            "Where each thread was (most recent call last):")
            self.cancel_received = (reason, _seconds(message.get("grace")))
            self.cancel_seen.set()
        self._inbox.put(message)

    def _handle_loop(self):
        while True:
            message = self._inbox.get()
            if message is None:
                break
            self._handle_message(message)
        self._eof = True
        with self._lock:
            waiters = list(self._waiters)
            self._waiters.clear()
        for waiter in waiters:
            waiter.event.set()

    def _handle_message(self, message):
        kind = message.get("type")
        if kind == "budget":
            if "remaining" not in message:
                return
            remaining = _seconds(message.get("remaining"))
            self._budget = (remaining, time.monotonic())
            if message.get("granted") is not None:
                with self._lock:
                    waiter = self._waiters.popleft() if self._waiters else None
                if waiter is not None:
                    waiter.remaining = remaining
                    waiter.replied = True
                    waiter.event.set()
        elif kind == "expiring":
            remaining = _seconds(message.get("remaining"))
            if remaining is None:
                return
            self._budget = (remaining, time.monotonic())
            with self._lock:
                handlers = list(self._expiring_handlers)
            for handler in handlers:
                self._dispatch(handler, (remaining,))
        elif kind == "warning":
            if message.get("resource") != "memory":
                return   # a resource a newer Overtime watches, that no handler here is for
            used, limit = _size(message.get("used")), _size(message.get("limit"))
            if used is None or limit is None:
                return
            with self._lock:
                self.memory_warning = (used, limit)
                handlers = list(self._memory_warning_handlers)
            for handler in handlers:
                self._dispatch(handler, (used, limit))
        elif kind == "cancel":
            if self.cancel is not None:
                return
            with self._lock:
                self.cancel = self.cancel_received
                handlers = list(self._cancel_handlers)
            for handler in handlers:
                self._dispatch(handler, self.cancel)
            after_cancel = self.after_cancel
            if after_cancel is not None:
                after_cancel()
        elif kind in MESSAGE_LISTENERS:
            MESSAGE_LISTENERS[kind](self, message)


def _is_ours(frame_summary):
    return os.path.dirname(os.path.abspath(frame_summary.filename)) == _PACKAGE_DIR


def dump_stacks(header, out=None):
    """Writes the stack of every thread but the library's own to stderr.

    Called from the reader thread: the main thread may be stuck in C code, but its Python
    stack is still there to read. Frames of this library on top of a stack (the SIGTERM
    handler waiting for this very message, or an extend() waiting for its reply), and
    what they called, are left out.
    """
    try:
        names = {t.ident: t.name for t in threading.enumerate()}
        main = threading.main_thread().ident
        parts = [header + "\n"]
        frames = sys._current_frames()
        for ident in sorted(frames, key=lambda i: (i != main, i)):
            name = names.get(ident, "unknown")
            if name.startswith("overtime-"):
                continue
            stack = traceback.extract_stack(frames[ident])
            for depth, entry in enumerate(stack):
                if depth > 0 and _is_ours(entry):
                    del stack[depth:]   # the library's own frames (and what they called)
                    break
            parts.append('\nThread "{}" (id {}):\n'.format(name, ident))
            parts.extend(traceback.format_list(stack))
        del frames
        text = "".join(parts)
        stream = out or sys.stderr
        if stream is None:
            os.write(2, text.encode("utf-8", "replace"))
        else:
            stream.write(text)
            stream.flush()
    except Exception:
        # Whatever went wrong above, faulthandler writes straight to fd 2.
        try:
            import faulthandler
            os.write(2, (header + "\n").encode())
            faulthandler.dump_traceback(file=2, all_threads=True)
        except Exception:
            pass


# ---- the process's channel ---------------------------------------------------------------

_CLAIM_VAR = "_OVERTIME_WORKER_SOCKET"
# How long connecting to OVERTIME_SOCKET may take (a full backlog): the program goes on
# without a channel rather than hang at import.
CONNECT_TIMEOUT = 2.0


def _peer_pid(sock):
    """The pid of the process at the other end of a Unix socket (SO_PEERCRED), or None."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[0]
    except (OSError, AttributeError):
        return None


def inherited_fd(environ=None):
    """The fd OVERTIME_FD names when it is this process's own channel, else None.

    Its own means: a Unix stream socket whose peer is this process's parent, i.e. the
    supervisor started this process itself. A process further down (a ``subprocess``
    child given fd 3, a grandchild behind a shell, a program whose fd
    3 is some other file) does not write on it: its lines would interleave with the
    leader's and steal its replies. Such a process connects to OVERTIME_SOCKET instead.
    """
    environ = os.environ if environ is None else environ
    text = environ.get("OVERTIME_FD")
    if not text:
        return None
    try:
        fd = int(text)
        info = os.fstat(fd)
    except (ValueError, OSError):
        return None
    if fd < 0 or not stat.S_ISSOCK(info.st_mode):
        return None
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return None
    try:
        if sock.family != socket.AF_UNIX or sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) != socket.SOCK_STREAM:
            return None
        if _peer_pid(sock) != os.getppid():
            return None
    except OSError:
        return None
    finally:
        sock.close()
    # Same task, but not the socket an ancestor of ours claimed: some other socket its
    # creator handed us as fd 3.
    task = "{}/{}".format(environ.get("OVERTIME_RUN", ""), environ.get("OVERTIME_TASK", ""))
    claim = "{}/{}:{}".format(task, info.st_dev, info.st_ino)
    earlier = environ.get(_CLAIM_VAR, "")
    if earlier.startswith(task + "/") and earlier != claim:
        return None
    environ[_CLAIM_VAR] = claim
    return fd


def connect_task_socket(environ=None):
    """A socket connected to OVERTIME_SOCKET (a path, or ``@name`` in Linux's abstract
    namespace), or None when it is unset or cannot be reached."""
    environ = os.environ if environ is None else environ
    address = environ.get("OVERTIME_SOCKET")
    if not address:
        return None
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(address)
        sock.setblocking(True)
    except (OSError, ValueError):
        sock.close()
        return None
    return sock


def open_from_environment(environ=None, inherited=True):
    """This process's channel, started; None when it has none (not under Overtime).

    fd 3 (OVERTIME_FD) when it is this process's own (see ``inherited_fd``), else a new
    connection to OVERTIME_SOCKET, else None. ``inherited=False`` (a forked child) skips
    fd 3: the parent's channel is the parent's.
    """
    environ = os.environ if environ is None else environ
    fd = inherited_fd(environ) if inherited else None
    sock = None
    if fd is None:
        sock = connect_task_socket(environ)
        if sock is None:
            return None
        fd = sock.fileno()
    try:
        os.set_blocking(fd, True)
    except OSError:
        pass
    channel = Channel(fd, sock, reporter_name(environ))
    channel.start()
    return channel


class SigtermBridge(object):
    """Turns SIGTERM into ``Cancelled`` in the main thread, once.

    Installed only under Overtime, only from the main thread, and only when SIGTERM still
    has its default disposition: a program with a handler of its own keeps it.
    """

    def __init__(self, get_channel):
        self._get_channel = get_channel
        self.installed = False
        self.raised = False
        self.previous = None
        self.handled = threading.Event()   # the handler has run since install()

    def install(self):
        if threading.current_thread() is not threading.main_thread():
            return False
        # Cleared before the handler can run: the handler sets it, and a SIGTERM landing in
        # the middle of clear() would wait for the lock clear() holds, in the same thread.
        self.handled.clear()
        try:
            if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
                return False
            self.previous = signal.signal(signal.SIGTERM, self._handle)
        except (ValueError, OSError):
            return False
        self.installed = True
        return True

    def after_cancel(self):
        """Called on the channel's handler thread once a cancel message is in.

        SIGTERM follows the message, and the kernel hands a signal sent to the process to
        any of its threads that will take it: normally the main thread, but not always (a
        thread that has just created another, or changed its signal mask, can take it
        first). CPython then runs the handler in the main thread only when that thread
        next runs Python code, so a main thread in ``time.sleep`` or a blocking read stays
        there and the grace runs out. The same happens when the signal lands in the main
        thread just before it enters such a call. So when the handler has not run soon
        after the message, the main thread is sent SIGTERM itself; a handler already
        under way ignores the second one. (The handler thread waits here: after a cancel,
        nothing else it carries is urgent.)
        """
        if self.handled.wait(SIGTERM_HANDLER_WAIT) or not self.installed:
            return
        try:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        except (OSError, ValueError):
            pass   # the main thread has ended: the interpreter is on its way out

    def uninstall(self):
        if not self.installed:
            return
        self.installed = False
        try:
            if signal.getsignal(signal.SIGTERM) == self._handle:
                signal.signal(signal.SIGTERM, self.previous if self.previous is not None else signal.SIG_DFL)
        except (ValueError, OSError):
            pass

    def _handle(self, signum, frame):
        self.handled.set()
        if self.raised:
            return   # cleanup is under way; a second SIGTERM must not cut it short
        channel = self._get_channel()
        cancel = None
        if channel is not None:
            channel.cancel_seen.wait(CANCEL_MESSAGE_WAIT)
            cancel = channel.cancel_received
        self.raised = True
        reason, grace = cancel if cancel is not None else ("signal", None)
        raise Cancelled(reason, grace)
