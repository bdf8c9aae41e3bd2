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


def send(bar):
    """Sends ``bar``'s state now."""
    bar.last = _monotonic()
    bar.deferred = False
    try:
        fields = bar.fields()
        _worker.progress(bar=bar.id, **fields)
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
