"""What the tqdm and rich bridges share: one reported bar, and the time throttle.

A bar reports from the program's own updates (``update()``, an iteration, ``advance``),
never from a redraw, so ``mininterval``, ``miniters`` or a disabled display change
nothing. At most one message per bar every ``INTERVAL`` seconds: an update that comes
sooner marks the bar *deferred*, and a helper thread sends the bar's latest state once
the interval is over, so the last value arrives within about ``INTERVAL`` even when the
bar then sits still for an hour. Creating, resetting, renaming and closing a bar report
at once. Nothing here ever raises into the program.
"""

import atexit
import itertools
import os
import threading
import time

import overtime_worker as _worker

INTERVAL = 0.2
_monotonic = time.monotonic


class Bar(object):
    """One bar as the supervisor sees it: its id, and how to read its fields now.

    ``fields()`` returns the progress fields (``completed``, ``total``, ``title``,
    ``detail``); the bridge gives it. ``last`` is when it was last sent; ``deferred``
    whether an update waits for the helper thread; ``count`` is free for the bridge (the
    tqdm bridge's own count while it iterates an enabled bar)."""

    __slots__ = ("id", "fields", "last", "deferred", "open", "count", "__weakref__")
    _numbers = {}

    def __init__(self, kind, fields):
        counter = Bar._numbers.get(kind)
        if counter is None:
            counter = Bar._numbers.setdefault(kind, itertools.count(1))
        self.id = "{}-{}".format(kind, next(counter))
        self.fields = fields
        self.last = 0.0
        self.deferred = False
        self.open = True
        self.count = None


def send(bar, closed=False):
    """Sends ``bar``'s state now; ``closed``: and that it is finished."""
    bar.last = _monotonic()
    bar.deferred = False
    try:
        fields = bar.fields()
        _worker.progress(bar=bar.id, closed=closed, **fields)
    except Exception:
        pass   # reporting must never break the program's loop


def updated(bar):
    """The program moved ``bar``: sends it, or leaves it to the helper thread when it was
    sent less than INTERVAL ago. Cheap when it is deferred already."""
    if bar.deferred:
        return
    if _monotonic() - bar.last >= INTERVAL:
        send(bar)
    else:
        _defer(bar)


class Steps(object):
    """A bar a framework's own callbacks move (Keras, Hugging Face's Trainer, joblib,
    Lightning's loops): they say when a stage begins (its title and how many steps), each
    step done, and when it ends; a step outside a stage is not sent. Steps are throttled as
    any bar's; a beginning and an end are sent at once. ``detail`` may be a callable, read
    only when a message is sent (a framework's logged metrics, formatted at most every
    ``INTERVAL``)."""

    __slots__ = ("bar", "completed", "total", "title", "detail")

    def __init__(self, kind):
        self.bar = Bar(kind, self._fields)
        self.bar.open = False   # until it begins
        self.completed = 0
        self.total = None
        self.title = None
        self.detail = None

    def begin(self, title, total, completed=0):
        self.title = title
        self.total = total
        self.completed = completed
        self.bar.open = True
        send(self.bar)

    def step(self, completed, total=None):
        self.completed = completed
        if total is not None:
            self.total = total
        if self.bar.open and not self.bar.deferred:
            updated(self.bar)

    def end(self):
        if self.bar.open:
            self.bar.open = False
            send(self.bar, closed=True)

    def _fields(self):
        fields = {"completed": self.completed}
        if self.total is not None:
            fields["total"] = self.total
        if self.title is not None:
            fields["title"] = self.title
        detail = self.detail() if callable(self.detail) else self.detail
        if detail:
            fields["detail"] = detail
        return fields


def metrics_text(logs, limit=4):
    """A framework's logged numbers as a detail: ``loss 0.2310 · accuracy 0.9100``."""
    parts = []
    for name, value in logs.items():
        if len(parts) == limit:
            break
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        parts.append("{} {:.4g}".format(name, number))
    return " · ".join(parts) or None


def bounded_total(value):
    """A framework's step count as a bar's total: None when unknown or infinite."""
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number > 0 else None


_lock = threading.Lock()
_pending = []
_wake = threading.Event()
_flusher = None


def _defer(bar):
    global _flusher
    bar.deferred = True
    with _lock:
        _pending.append(bar)
        if _flusher is None:
            _flusher = threading.Thread(target=_flush_loop, name="overtime-bars", daemon=True)
            _flusher.start()
    _wake.set()


def _flush_loop():
    while True:
        _wake.wait()
        time.sleep(INTERVAL)
        _wake.clear()
        with _lock:
            bars = list(_pending)
            del _pending[:]
        for bar in bars:
            if not bar.deferred:
                continue
            if bar.open and _worker._current() is not None:
                send(bar)
            else:
                bar.deferred = False


def _send_deferred_at_exit():
    # Registered after overtime_worker's own exit flush, so it runs before it (atexit is
    # last in, first out): what waited for the helper thread goes out with the rest.
    with _lock:
        bars = list(_pending)
        del _pending[:]
    for bar in bars:
        if bar.deferred and bar.open:
            send(bar)


atexit.register(_send_deferred_at_exit)


def _after_fork():
    # The helper thread is the parent's; a forked child starts its own when it needs one.
    global _flusher, _lock
    _flusher = None
    _lock = threading.Lock()
    del _pending[:]
    _wake.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
