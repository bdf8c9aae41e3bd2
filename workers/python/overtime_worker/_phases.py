"""Phases and checkpoint advice: which part of its work a job is in, and the supervisor's
word that it is time to write a checkpoint.

Internal; the public API (``phase``, ``set_phase``, ``on_checkpoint_advice``,
``checkpoint_advised``, ``Advice``) is re-exported by ``overtime_worker``.

The phase is the process's: one connection to the supervisor (fd 3 or this process's own
to ``OVERTIME_SOCKET``) carries one phase. Phases entered with ``phase()`` form one stack
per process, shared by its threads; the phase in force is the newest entry still open,
whichever thread opened it. Leaving an entry that is not the newest (another thread
entered a phase since) sends nothing: the newer one is still in force. A forked child
keeps the parent's stack and sends its phase on its own connection at its next change.
"""

import contextlib
import datetime
import functools
import inspect
import math
import os
import threading
import time
from typing import Callable, NamedTuple, Optional, Union

import overtime_worker as _package   # holds the process's channel; read at call time
from . import _channel
from ._channel import MAX_TEXT, _seconds, encode

MAIN = "main"   # the phase a job is in before it names one

Window = Union[int, float, datetime.timedelta, None]


class Advice(NamedTuple):
    """The supervisor's advice to write a checkpoint now.

    Attributes:
        action: what to do: ``'checkpoint'``.
        remaining: seconds left before the job's hard end (``--max-runtime``, the batch's
            deadline, the engine's end) when the advice was sent.
        why: the supervisor's reasons, for a log line.
        received: ``time.monotonic()`` when it arrived.
    """

    action: str
    remaining: float
    why: str
    received: float

    def left(self) -> float:
        """Seconds left before the hard end now, counted down since the advice came."""
        return max(0.0, self.remaining - (time.monotonic() - self.received))


class _Entry(object):
    __slots__ = ("name", "window")

    def __init__(self, name, window):
        self.name = name
        self.window = window


class _ChannelState(object):
    """What one channel has heard and said about phases and advice."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = (MAIN, None)    # (name, window) last sent on this channel; a job starts in main
        self.advice = None          # the first Advice heard
        self.handlers = []


_lock = threading.Lock()
_stack = [_Entry(MAIN, None)]   # the bottom entry is never left; set_phase may rename it


def _state(channel):
    state = channel.__dict__.get("_phases")
    if state is None:
        state = channel.__dict__.setdefault("_phases", _ChannelState())
    return state


def _checked_name(name):
    if not isinstance(name, str):
        raise TypeError("phase name must be a string, not {!r}".format(name))
    if not name.strip():
        raise ValueError("phase name must not be empty")
    return name[:MAX_TEXT]


def _checked_window(window):
    if window is None:
        return None
    if isinstance(window, datetime.timedelta):
        seconds = window.total_seconds()
    elif isinstance(window, bool) or not isinstance(window, (int, float)):
        raise TypeError("phase window must be seconds (a number) or a timedelta, not {!r}".format(window))
    else:
        seconds = window
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
        raise ValueError("phase window must be a finite number of seconds >= 0 (0: no limit), not {!r}".format(window))
    return int(seconds) if float(seconds).is_integer() else float(seconds)


def _send_top(channel):
    """Sends the phase in force unless this channel said it last. Called under ``_lock``,
    so the last line sent is the newest entry's."""
    if channel is None:
        return
    top = _stack[-1]
    current = (top.name, top.window)
    state = _state(channel)
    if state.sent == current:
        return
    message = {"type": "phase", "name": top.name}
    if top.window is not None:
        message["window"] = top.window
    if channel.send_line(encode(message)):
        state.sent = current


def _current_channel():
    return _package._current()


def set_phase(name: str, window: Window = None) -> None:
    """Says the job is now in phase ``name``; until the next phase, that phase's window
    rules (``window``: seconds or a timedelta; 0 for no limit in this phase; None for the
    supervisor's own window for it). Counts as a heartbeat.

    Renames the innermost ``with phase(...)`` block open (or the job's base phase when
    none is): leaving that block still returns to the phase before it. Nothing is sent
    when the phase and window are the ones in force. Outside Overtime it does nothing
    (its arguments are still checked).

    Raises:
        TypeError: ``name`` is not a string, or ``window`` neither a number nor a timedelta.
        ValueError: ``name`` is empty, or ``window`` negative, NaN or infinite.
    """
    name, window = _checked_name(name), _checked_window(window)
    channel = _current_channel()
    with _lock:
        top = _stack[-1]
        top.name, top.window = name, window
        _send_top(channel)


class phase(object):
    """The job is in phase ``name`` for the length of a ``with`` block or a call::

        with overtime_worker.phase("compile", window=600):   # seconds, or a timedelta
            model = torch.compile(model)

        @overtime_worker.phase("checkpoint")
        def save(state): ...

    Entering sends ``{"type":"phase","name":…}`` (with ``window`` when given; 0 means no
    limit in this phase); leaving sends the phase in force before it (``main`` when there
    was none), also when the block raised. Nested phases return in order. Only a change is
    sent: re-entering the phase in force says nothing. Decorates plain functions
    (``functools.wraps`` keeps their name and signature); a generator or a coroutine would
    leave the phase before its body runs, so it is refused: use ``with`` inside it.
    Outside Overtime it does nothing (its arguments are still checked).

    Raises:
        TypeError, ValueError: as ``set_phase``; TypeError also for a decorated generator
            or coroutine function.
    """

    def __init__(self, name: str, window: Window = None):
        self.name = _checked_name(name)
        self.window = _checked_window(window)
        self._open = []   # this object's open entries, newest last (it may be re-entered)

    def __enter__(self):
        entry = _Entry(self.name, self.window)
        channel = _current_channel()
        with _lock:
            _stack.append(entry)
            self._open.append(entry)
            _send_top(channel)
        return self

    def __exit__(self, *exc_info):
        channel = _current_channel()
        with _lock:
            entry = self._open.pop() if self._open else None
            if entry is not None and entry in _stack:
                was_newest = _stack[-1] is entry
                _stack.remove(entry)
                if was_newest:
                    _send_top(channel)
        return False

    def __call__(self, function):
        if inspect.isgeneratorfunction(function) or inspect.iscoroutinefunction(function) \
                or inspect.isasyncgenfunction(function):
            raise TypeError("phase({!r}) decorates plain functions; {} would leave the phase before its body runs: "
                            "use `with overtime_worker.phase(...)` inside it".format(self.name, function.__name__))
        name, window = self.name, self.window

        @functools.wraps(function)
        def in_phase(*args, **kwargs):
            with phase(name, window):
                return function(*args, **kwargs)
        return in_phase


@contextlib.contextmanager
def restoring():
    """A block whose phase changes end with it: leaving it returns to the phase in force
    at its start (for the framework bridges, whose hooks call ``set_phase``)."""
    with _lock:
        top = _stack[-1]
        name, window = top.name, top.window
    with phase(name, window):
        yield


# ---- checkpoint advice ------------------------------------------------------------------

def _receive_advice(channel, message):
    """On the channel's handler thread: records the first checkpoint advice and hands it
    to the handlers. Advice to do anything else is a newer Overtime's, for another library."""
    if message.get("do") != "checkpoint":
        return
    remaining = _seconds(message.get("remaining"))
    if remaining is None or not 0 <= remaining < math.inf:
        return
    why = message.get("why")
    advice = Advice("checkpoint", remaining, why if isinstance(why, str) else "", time.monotonic())
    state = _state(channel)
    with state.lock:
        if state.advice is not None:
            return
        state.advice = advice
        handlers = list(state.handlers)
    for handler in handlers:
        channel._dispatch(handler, (advice,))


def on_checkpoint_advice(handler: Callable[[Advice], None]) -> Callable[[Advice], None]:
    """Calls ``handler(advice)`` when Overtime advises a checkpoint (an ``Advice``: its
    ``remaining`` seconds before the job's hard end, ``why``, ``action``); usable as a
    decorator.

    Overtime advises once, when the job's pace says it will not finish before its hard end
    and the time left has come down to what a checkpoint takes. Runs on a library thread,
    like ``on_cancel`` handlers, so it may block; registered after the advice came, it
    runs at once. Outside Overtime it is never called.
    """
    channel = _current_channel()
    if channel is None:
        return handler
    state = _state(channel)
    with state.lock:
        state.handlers.append(handler)
        advice = state.advice
    if advice is not None:
        channel._dispatch(handler, (advice,))
    return handler


def checkpoint_advised() -> Optional[Advice]:
    """The checkpoint advice Overtime sent (see ``on_checkpoint_advice``), or None while
    there has been none (and outside Overtime). Cheap enough to call every step."""
    channel = _current_channel()
    return None if channel is None else _state(channel).advice


def _after_fork():
    global _lock
    _lock = threading.Lock()   # a thread of the parent's may have held it


_channel.MESSAGE_LISTENERS["advice"] = _receive_advice
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
