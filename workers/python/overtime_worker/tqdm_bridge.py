"""tqdm progress bars report to Overtime, with no change to the program.

Under Overtime the start-up hook (``overtime_worker.pth`` of a pip install, or
``sitecustomize.py`` with ``workers/python`` on PYTHONPATH) arranges for ``patch()`` to
run when ``tqdm`` is first imported; tqdm itself is never imported by the hook. So
``for x in tqdm(data):`` — and the bars of libraries built on tqdm (Lightning, Hugging
Face, …) — keep the job alive and show ``n/total``, the description and the postfix in
Overtime's reports.

Each tqdm instance is its own bar: its progress messages carry ``"bar": "tqdm-<n>"``, a
number given in the order bars are created in this process. A bar sends ``completed`` (its
count), ``total``, its description as ``title`` (an outer open bar's when it has none) and
its postfix as ``detail``.

The bridge follows the work, not the redraw: it counts iterations, ``update()`` calls and
assignments to ``bar.n`` (Lightning's ``TQDMProgressBar`` sets ``n`` on every step and
redraws only every ``refresh_rate`` steps), whatever ``mininterval``, ``miniters``,
``TQDM_MININTERVAL`` or ``disable`` say
(a disabled bar keeps no count, so the bridge keeps ``bar.n`` up to date for it), and
sends at most one message per bar every 0.2 s, the latest always within about that time
(see ``overtime_worker._bars``). Creating, resetting, describing and closing a bar report
at once. Nothing here ever raises into the program.

Without the start-up hook (``python -S``, a vendored copy), call ``patch()`` after
importing tqdm. ``OVERTIME_TQDM=0`` (or ``OVERTIME_BRIDGE=0``) turns the hook's bridge off.
"""

import threading
import weakref

import overtime_worker as _worker
from overtime_worker import _bars

__all__ = ["patch"]

_lock = threading.Lock()
_open_bars = []   # weak references to open tqdm instances, oldest first


def patch_module(module):
    """The start-up hook's entry: ``module`` is ``tqdm.std``, just executed."""
    return patch(module.tqdm)


def patch(tqdm_class=None):
    """Makes ``tqdm_class`` (default: ``tqdm.std.tqdm``, which every tqdm bar derives
    from) report to Overtime. Returns False when it was patched already."""
    if tqdm_class is None:
        from tqdm.std import tqdm as tqdm_class
    if tqdm_class.__dict__.get("_overtime_bridge"):
        return False
    # getattr, not __dict__: tqdm wraps __init__ in a partialmethod (its TQDM_* env defaults).
    original = {name: getattr(tqdm_class, name) for name in (
        "__init__", "__iter__", "update", "set_description", "set_description_str",
        "set_postfix", "set_postfix_str", "reset", "close")}
    original_iter = original["__iter__"]
    original_update = original["update"]

    def __init__(self, *args, **kwargs):
        original["__init__"](self, *args, **kwargs)
        if _worker._current() is not None:
            try:
                _opened(self, args, kwargs)
            except Exception:
                pass

    def __iter__(self):
        state = self.__dict__.get("_overtime")
        if state is None or not state.open:
            return original_iter(self)
        return _counting(self, state, original_iter)

    def update(self, n=1):
        state = self.__dict__.get("_overtime")
        if state is None or not state.open:
            return original_update(self, n)
        if self.disable:
            try:
                self.n += n   # tqdm keeps no count for a disabled bar
            except TypeError:
                pass
            return None
        # Reported by the assignment to `n` it makes (_WatchedCount).
        return original_update(self, n)

    def _after(name, force):
        method = original[name]

        def wrapper(self, *args, **kwargs):
            value = method(self, *args, **kwargs)
            state = self.__dict__.get("_overtime")
            if state is not None and state.open:
                if force:
                    _bars.send(state)
                else:
                    _bars.updated(state)
            return value
        wrapper.__name__ = name
        wrapper.__doc__ = method.__doc__
        wrapper.__wrapped__ = method
        return wrapper

    def close(self):
        try:
            if not self.disable and _cancelled():
                # The task is being cancelled: tqdm would draw the bar's last state again,
                # after Overtime's notice of the cancel. The bar is reported closed, and
                # closes quietly.
                state = self.__dict__.get("_overtime")
                if state is not None and state.open:
                    _closed(self, state)
                self.disable = True
                self._decr_instances(self)
                return None
        except Exception:
            pass
        try:
            return original["close"](self)
        finally:
            try:
                state = self.__dict__.get("_overtime")
                if state is not None and state.open:
                    _closed(self, state)
            except Exception:
                pass   # also when called from __del__ while the interpreter shuts down

    for function, name in ((__init__, "__init__"), (__iter__, "__iter__"), (update, "update"), (close, "close")):
        function.__doc__ = original[name].__doc__
        function.__wrapped__ = original[name]
        setattr(tqdm_class, name, function)
    for name, force in (("set_postfix", False), ("set_postfix_str", False), ("set_description", True),
                        ("set_description_str", True), ("reset", True)):
        setattr(tqdm_class, name, _after(name, force))
    tqdm_class.n = _WatchedCount()
    tqdm_class._overtime_bridge = True
    return True


class _WatchedCount:
    """tqdm's ``n``, watched: every assignment is work done, whoever makes it (``update()``,
    ``reset()``, a library that sets ``bar.n`` itself and redraws now and then)."""

    def __get__(self, bar, owner=None):
        if bar is None:
            return self
        state = bar.__dict__
        if "_overtime_n" in state:
            return state["_overtime_n"]
        if "n" in state:
            return state["n"]   # a bar made before patch() ran
        raise AttributeError("n")

    def __set__(self, bar, value):
        state = bar.__dict__
        state["_overtime_n"] = value
        reported = state.get("_overtime")
        if reported is not None and reported.open and not reported.deferred:
            try:
                _bars.updated(reported)
            except Exception:
                pass


def _opened(bar, args, kwargs):
    state = bar.__dict__
    if "desc" not in state:
        # A disabled bar does not keep its description; take it from the arguments.
        desc = kwargs.get("desc", args[1] if len(args) > 1 else None)
        state["_overtime_desc"] = desc if isinstance(desc, str) else None
    reference = weakref.ref(bar)
    reported = _bars.Bar("tqdm", lambda: _fields(reference()))
    state["_overtime"] = reported
    with _lock:
        _open_bars.append(reference)
    _bars.send(reported)


def _counting(bar, state, original_iter):
    """Iterates ``bar`` counting each item as done when the next one is asked for, as
    tqdm does; tqdm itself updates ``bar.n`` only when it redraws (``miniters``,
    ``mininterval``), and a disabled bar not at all."""
    disabled = bar.disable
    source = iter(bar.iterable) if disabled else original_iter(bar)
    n = bar.n
    try:
        for item in source:
            yield item
            n += 1
            state.count = n
            if not state.deferred:
                _bars.updated(state)
    finally:
        state.count = None
        if disabled:
            bar.n = n
            bar.close()   # as tqdm does when an enabled bar's loop ends
        else:
            close = getattr(source, "close", None)
            if close is not None:
                close()   # tqdm's own loop sets bar.n and closes the bar


def _cancelled():
    channel = _worker._current()
    return channel is not None and channel.cancel_received is not None


def _closed(bar, state):
    _bars.send(state, closed=True)
    state.open = False
    with _lock:
        _open_bars[:] = [ref for ref in _open_bars if ref() is not None and ref() is not bar]
        top = _innermost()
    if top is not None:
        top_state = top.__dict__.get("_overtime")
        if top_state is not None:
            _bars.send(top_state)   # the outer bar is what moves now


def _innermost():
    for ref in reversed(_open_bars):
        bar = ref()
        if bar is not None:
            state = bar.__dict__.get("_overtime")
            if state is not None and state.open:
                return bar
    return None


def _title(bar):
    desc = bar.__dict__.get("desc")
    if desc is None:
        desc = bar.__dict__.get("_overtime_desc")
    if not desc:
        return None
    desc = desc.strip()
    return desc[:-1].rstrip() if desc.endswith(":") else desc


def _fields(bar):
    fields = {}
    if bar is None:
        return fields
    state = bar.__dict__
    count = state["_overtime"].count
    n = count if count is not None else state.get("_overtime_n", state.get("n"))
    if n is not None:
        fields["completed"] = n
    total = state.get("total")
    if total is not None:
        fields["total"] = total
    title = _title(bar)
    if title is None:
        with _lock:
            outer = [ref() for ref in _open_bars]
        for other in reversed(outer):
            if other is not None and other is not bar and _title(other):
                title = _title(other)
                break
    if title is not None:
        fields["title"] = title
    postfix = state.get("postfix")
    if postfix:
        fields["detail"] = str(postfix)
    return fields
