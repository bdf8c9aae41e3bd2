"""Report progress to Overtime, ask it for time, and learn why you are being stopped.

A job run by ``overtime run`` has a time budget that its progress extends. This module
is the Python side of that conversation (protocol v1 on fd 3, see docs/protocol.md)::

    import overtime_worker as ot

    for batch in ot.track(batches, title="Training"):   # progress per item
        step(batch)
    ot.progress(completed=3, total=10, detail="shard-3")  # or by hand
    ot.extend(600, why="building the index")              # more time before a silent step
    ot.result({"loss": 0.12})                             # shown in Overtime's report

    try:
        train()
    except ot.Cancelled as c:                             # raised in the main thread
        save_checkpoint()                                 # c.reason: 'timeout', 'user', …
        raise

    @ot.on_memory_warning                                 # past --memory-warn (90% of --memory-max)
    def memory_is_tight(used, limit):                     # bytes; cancelled at `limit`
        save_checkpoint()

    with ot.phase("compile", window=600):                 # a phase with a window of its own
        model = compile(model)

    @ot.on_checkpoint_advice                              # the job will not finish in time:
    def before_the_end(advice):                           # advice.remaining, advice.why
        save_checkpoint()

Every call is a cheap no-op when the program is not run by Overtime (no ``OVERTIME_FD``),
so the same program runs standalone. Every call is thread-safe and returns at once (only
``extend`` waits, for the supervisor's answer): a writer thread sends, the latest progress
wins while it is busy, and ``extend``, ``result`` and ``ready`` are never dropped.

Programs that use tqdm or rich report without any change once this package is installed
or on PYTHONPATH (see ``overtime_worker.tqdm_bridge`` and ``overtime_worker.rich_bridge``).

The channel is fd 3 when this process inherited it from the supervisor itself, else its
own connection to ``OVERTIME_SOCKET``: a ``subprocess`` child, a multiprocessing worker
(forked or spawned) or a grandchild behind a shell reports too, with no change.
"""

import atexit
import math
import os
import threading
from typing import Callable, Iterable, Iterator, Optional, Tuple, TypeVar

from ._channel import MAX_LINE, MAX_TEXT, Cancelled, SigtermBridge, encode, open_from_environment
from ._phases import Advice, checkpoint_advised, on_checkpoint_advice, phase, set_phase

__all__ = [
    "Advice",
    "Cancelled",
    "active",
    "cancel_reason",
    "checkpoint_advised",
    "extend",
    "flush",
    "heartbeat",
    "memory_warning",
    "on_cancel",
    "on_checkpoint_advice",
    "on_expiring",
    "on_memory_warning",
    "phase",
    "progress",
    "ready",
    "remaining",
    "result",
    "set_phase",
    "track",
]

try:
    from ._version import version as __version__   # written into every built wheel
except ImportError:   # run from a checkout (PYTHONPATH=workers/python): the checkout's VERSION
    def _checkout_version() -> str:
        try:
            with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "VERSION")) as f:
                return f.read().strip()
        except OSError:
            return "unknown"
    __version__ = _checkout_version()

T = TypeVar("T")

_channel = None
_connect_pending = False   # a forked child connects its own channel on first use
_connect_lock = threading.Lock()
_sigterm = SigtermBridge(lambda: _channel)
_EXIT_FLUSH_SECONDS = 5.0


def active() -> bool:
    """True when this process runs under Overtime and reports on its channel."""
    return _current() is not None


def progress(completed: Optional[int] = None, total: Optional[int] = None, fraction: Optional[float] = None,
             title: Optional[str] = None, detail: Optional[str] = None, bar: Optional[str] = None,
             closed: bool = False) -> None:
    """Reports progress; counts as a heartbeat, so it moves the deadline.

    Give ``completed`` and ``total`` (whole numbers, floats are rounded down) or a
    ``fraction`` between 0 and 1; ``title`` names the phase ("Epoch 3/10") and ``detail``
    the item ("loss 0.231"). Fields left out keep their last value at the supervisor, so
    a loop may send its title once and then only ``completed``.

    ``bar`` names which of this process's progress bars the numbers are (any string,
    e.g. ``"epoch"`` and ``"batch"``): each bar is merged and judged on its own, so
    under ``--require-advance`` an inner bar that starts again at 0 is a new round of
    that bar, not a step back. The tqdm and rich bridges name each bar they report.

    ``closed=True`` says the bar is finished (a loop ended, a file written): the
    supervisor keeps showing it until another bar moves, and a cancel for silence after
    it says that bar closed and when.

    Never blocks: while the supervisor is slow, newer calls overwrite older ones (fields
    merged), so a tight loop costs a few microseconds a call, not a line each.

    Raises:
        TypeError: a count or fraction that is not a number.
    """
    channel = _current()
    if channel is None:
        return
    fields = {}
    if completed is not None:
        fields["completed"] = _count(completed, "completed")
    if total is not None:
        fields["total"] = _count(total, "total")
    if fraction is not None:
        try:
            share = float(fraction)
        except (TypeError, ValueError):
            raise TypeError("fraction must be a number between 0 and 1, not {!r}".format(fraction))
        if not math.isnan(share):
            fields["fraction"] = min(1.0, max(0.0, share))
    if title is not None:
        fields["title"] = str(title)[:MAX_TEXT]
    if detail is not None:
        fields["detail"] = str(detail)[:MAX_TEXT]
    if closed:
        fields["closed"] = True
    if fields:
        if bar is not None:
            fields["bar"] = str(bar)[:MAX_TEXT]
        channel.send_progress(fields)
    else:
        channel.send_heartbeat()


def heartbeat() -> None:
    """Says "still alive" without new progress; moves the deadline like progress does
    (except under ``overtime run --require-advance``, where only progress that advances
    counts).

    Heartbeats coalesce: many calls while the writer is busy become one line.
    """
    channel = _current()
    if channel is not None:
        channel.send_heartbeat()


def extend(seconds: float, why: Optional[str] = None, timeout: float = 10.0) -> Optional[float]:
    """Asks for the deadline to be at least ``seconds`` from now, before a long silent step.

    Blocks until the supervisor answers (at most ``timeout`` seconds) and returns the
    seconds the job now has: at least ``seconds`` when granted in full, less when
    ``--max-runtime`` clipped it, None for no limit. Without an answer in time it
    returns the latest budget known (see ``remaining()``). Outside Overtime it returns
    None at once.

    Raises:
        ValueError: ``seconds`` is not a number greater than 0.
    """
    try:
        amount = float(seconds)
    except (TypeError, ValueError):
        raise ValueError("extend: seconds must be a number > 0, not {!r}".format(seconds))
    if not amount > 0 or math.isinf(amount):
        raise ValueError("extend: seconds must be a finite number > 0, not {!r}".format(seconds))
    channel = _current()
    if channel is None:
        return None
    return channel.extend(amount, why, timeout)


def remaining() -> Optional[float]:
    """Seconds left before the deadline the supervisor last announced, counted down since.

    The supervisor announces its budget at start, in answer to ``extend``, in ``expiring``
    and after an operator's extend or revoke; progress moves the deadline later without
    a word, so this is a lower bound. None when there is no limit, nothing was announced
    yet, or the program is not run by Overtime.
    """
    channel = _current()
    return None if channel is None else channel.remaining()


def result(value) -> None:
    """Sends the job's return value (any JSON value); the last one sent wins.

    Never dropped: it is sent before the process exits, even right before ``sys.exit``.
    The value is checked everywhere, also outside Overtime, so a value that cannot be
    sent fails on your laptop rather than in production.

    Raises:
        TypeError: the value is not JSON-serialisable.
        ValueError: it holds NaN or infinity, or its line would pass the protocol's
            64 KiB limit.
    """
    line = encode({"type": "result", "value": value})
    if len(line) - 1 > MAX_LINE:
        raise ValueError("result: the value is {} bytes as JSON; a protocol line holds at most {} "
                         "(send a summary and write the rest to a file)".format(len(line) - 1, MAX_LINE))
    channel = _current()
    if channel is not None:
        channel.send_line(line)


def ready() -> None:
    """Says the job is up (for services; a queue may wait for it before starting others)."""
    channel = _current()
    if channel is not None:
        channel.send_line(b'{"type":"ready"}\n')


def track(iterable: Iterable[T], total: Optional[int] = None, title: Optional[str] = None) -> Iterator[T]:
    """Yields the items of ``iterable``, reporting ``completed``/``total`` as each is done.

    An item counts as done when the loop asks for the next one. ``total`` defaults to
    ``len(iterable)`` when it has one. Outside Overtime it is a plain loop.

    Example::

        for path in overtime_worker.track(paths, title="Resizing"):
            resize(path)
    """
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except (TypeError, AttributeError):
            total = None
    if _current() is None:
        for item in iterable:
            yield item
        return
    done = 0
    progress(completed=0, total=total, title=title)
    try:
        for item in iterable:
            yield item
            done += 1
            progress(completed=done, total=total, title=title)
    finally:
        progress(completed=done, total=total, title=title)


def on_cancel(handler: Callable[[str, Optional[float]], None]) -> Callable[[str, Optional[float]], None]:
    """Calls ``handler(reason, grace)`` when Overtime cancels the job; usable as a decorator.

    The handler runs on a library thread as soon as the cancel message arrives, while the
    main thread gets ``Cancelled``; it may block (within the grace period) and may call
    any function of this module. Registered after the cancel came, it runs at once.
    Outside Overtime it is never called.
    """
    channel = _current()
    if channel is not None:
        channel.add_cancel_handler(handler)
    return handler


def on_expiring(handler: Callable[[float], None]) -> Callable[[float], None]:
    """Calls ``handler(remaining)`` when the deadline is near (``overtime run --warn-before``).

    The time to write a checkpoint, or to ``extend()``. Runs on a library thread, like
    ``on_cancel`` handlers; usable as a decorator. Outside Overtime it is never called.
    """
    channel = _current()
    if channel is not None:
        channel.add_expiring_handler(handler)
    return handler


def on_memory_warning(handler: Callable[[int, int], None]) -> Callable[[int, int], None]:
    """Calls ``handler(used, limit)`` when the job's memory passes its warning level
    (``overtime run --memory-warn``, by default 90% of ``--memory-max``); usable as a
    decorator.

    ``used`` is the job's memory in bytes when it passed the level (all of its processes:
    its cgroup's usage, or the sum of their resident sets), ``limit`` the ``--memory-max``
    at which Overtime cancels it with reason ``'memory'``. Overtime warns once, every
    process of the job that reports at the time: the moment to write a checkpoint,
    halve a batch size, drop a cache. Runs on a library thread, like ``on_cancel``
    handlers, so it may block; a handler registered after the warning came runs at once
    with it. Outside Overtime it is never called.
    """
    channel = _current()
    if channel is not None:
        channel.add_memory_warning_handler(handler)
    return handler


def memory_warning() -> Optional[Tuple[int, int]]:
    """``(used, limit)`` in bytes from Overtime's memory warning (see ``on_memory_warning``),
    or None while there has been none (and outside Overtime)."""
    channel = _current()
    return None if channel is None else channel.memory_warning


def cancel_reason() -> Optional[str]:
    """The reason Overtime gave for cancelling this job ('timeout', 'memory', …), or None so far."""
    channel = _current()
    cancel = None if channel is None else channel.cancel_received
    return None if cancel is None else cancel[0]


def flush(timeout: float = 5.0) -> bool:
    """Waits until everything sent so far has been written to the supervisor.

    Runs by itself at exit; call it before ``os._exit``, which skips that.
    Returns False when ``timeout`` passed first. Outside Overtime returns True at once.
    """
    channel = _current()
    return True if channel is None else channel.flush(timeout)


# ---- internals ---------------------------------------------------------------------------

def _count(value, name):
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):   # not a number, NaN, infinity
        raise TypeError("{} must be a whole number >= 0, not {!r}".format(name, value)) from None
    return number if number > 0 else 0


def _flush_at_exit():
    channel = _channel
    if channel is not None:
        try:
            channel.flush(_EXIT_FLUSH_SECONDS)
        except Cancelled:
            pass   # cancelled while exiting anyway: nothing left to clean up


def _current():
    """This process's channel; in a forked child, its own, connected on first use."""
    channel = _channel
    if channel is None and _connect_pending:
        return _connect_after_fork()
    return channel


def _connect_after_fork():
    global _channel, _connect_pending
    with _connect_lock:
        if _connect_pending:
            _connect_pending = False
            _channel = open_from_environment(inherited=False)
    return _channel


def _forget_after_fork():
    # A forked child (a DataLoader worker, a multiprocessing pool) inherits its parent's
    # channel but none of its threads, and writing on it would interleave lines with the
    # parent's and steal its replies. It drops it (closing its copy of a connection of
    # the parent's own; fd 3 stays, it is the parent's) and, on first use, connects its
    # own to OVERTIME_SOCKET when there is one; else it stays quiet. Either way it dies
    # of SIGTERM the default way, as a pool worker is expected to.
    global _channel, _connect_pending, _connect_lock
    channel, _channel = _channel, None
    _connect_lock = threading.Lock()   # a thread of the parent's may have held it
    _connect_pending = bool(os.environ.get("OVERTIME_SOCKET"))
    if channel is not None and channel.sock is not None:
        try:
            channel.sock.close()
        except OSError:
            pass
    _sigterm.uninstall()


def _start(environ=None):
    global _channel, _connect_pending
    _connect_pending = False
    _channel = open_from_environment(environ)
    if _channel is not None and _sigterm.install():
        _channel.after_cancel = _sigterm.after_cancel


def _restart_for_tests(environ=None):
    """Forgets the current channel and opens the one the environment names (tests only)."""
    global _channel
    if _channel is not None:
        _channel.shutdown()
    _channel = None
    _sigterm.uninstall()
    _sigterm.raised = False
    _start(environ)
    return _channel


_start()
atexit.register(_flush_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
