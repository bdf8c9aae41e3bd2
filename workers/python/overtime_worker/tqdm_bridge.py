"""tqdm progress bars report to Overtime, with no change to the program.

Installing this package puts ``overtime_worker.pth`` in site-packages. At interpreter
start-up it looks at two environment variables and, under Overtime (``OVERTIME_FD`` set,
``OVERTIME_TQDM`` not ``0``), arranges for ``patch()`` to run when ``tqdm`` is first
imported; tqdm itself is never imported by the hook. So ``for x in tqdm(data):`` — and
the bars of libraries built on tqdm (Lightning, Hugging Face, …) — keep the job alive and
show ``n/total``, the description and the postfix in Overtime's reports.

What is reported: the innermost open bar (the latest created and not yet closed) as
``completed``/``total``, its description as ``title`` (an outer bar's when it has none),
its postfix as ``detail``. Updates of outer bars count as heartbeats. A bar with
``disable=True`` (or ``disable=None`` without a terminal) still reports: tqdm keeps no
count for it, so the bridge counts iterations and ``update()`` calls itself and keeps
``bar.n`` up to date.

Reports are throttled to 20 a second per bar (a skipped one is sent 50 ms later by a
helper thread, so the last value is never lost); creating, resetting, describing and
closing a bar report at once. Nothing here ever raises
into the program.

Without the ``.pth`` hook (a vendored copy, an editable install), call ``patch()``
after importing tqdm.
"""

import threading
import time
import weakref

import overtime_worker as _worker

__all__ = ["patch"]

_INTERVAL = 0.05
_lock = threading.Lock()
_open_bars = []   # weak references to open bars, oldest first
_monotonic = time.monotonic


def patch(tqdm_class=None):
    """Makes ``tqdm_class`` (default: ``tqdm.std.tqdm``, which every tqdm bar derives
    from) report to Overtime. Returns False when it was patched already."""
    if tqdm_class is None:
        from tqdm.std import tqdm as tqdm_class
    if tqdm_class.__dict__.get("_overtime_bridge"):
        return False
    # getattr, not __dict__: tqdm wraps __init__ in a partialmethod (its TQDM_* env defaults).
    original = {name: getattr(tqdm_class, name) for name in (
        "__init__", "__iter__", "update", "refresh", "display", "set_description",
        "set_description_str", "set_postfix", "set_postfix_str", "reset", "close")}

    def __init__(self, *args, **kwargs):
        original["__init__"](self, *args, **kwargs)
        if _worker._channel is not None:
            _guard(_opened, self, args, kwargs)

    def __iter__(self):
        if self.disable and _tracked(self):
            return _counting(self)   # tqdm walks a disabled bar's iterable without counting
        return original["__iter__"](self)

    def update(self, n=1):
        if self.disable and _tracked(self):
            try:
                self.n += n
            except TypeError:
                pass
            _guard(_report, self, False)
            return None
        shown = original["update"](self, n)
        if _tracked(self):
            _guard(_report, self, False)
        return shown

    def _after(name, force):
        method = original[name]

        def wrapper(self, *args, **kwargs):
            value = method(self, *args, **kwargs)
            if _tracked(self):
                _guard(_report, self, force)
            return value
        wrapper.__name__ = name
        wrapper.__doc__ = method.__doc__
        wrapper.__wrapped__ = method
        return wrapper

    def close(self):
        try:
            return original["close"](self)
        finally:
            try:
                if _tracked(self):
                    _closed(self)
            except Exception:
                pass   # also when called from __del__ while the interpreter shuts down

    for function, name in ((__init__, "__init__"), (__iter__, "__iter__"), (update, "update"), (close, "close")):
        function.__doc__ = original[name].__doc__
        function.__wrapped__ = original[name]
        setattr(tqdm_class, name, function)
    for name, force in (("refresh", False), ("display", False), ("set_postfix", False),
                        ("set_postfix_str", False), ("set_description", True),
                        ("set_description_str", True), ("reset", True)):
        setattr(tqdm_class, name, _after(name, force))
    tqdm_class._overtime_bridge = True
    return True


def _guard(function, *args):
    try:
        function(*args)
    except Exception:
        pass   # reporting must never break the program's loop


def _tracked(bar):
    return _worker._channel is not None and bar.__dict__.get("_overtime_open", False)


def _opened(bar, args, kwargs):
    state = bar.__dict__
    if "desc" not in state:
        # A disabled bar does not keep its description; take it from the arguments.
        desc = kwargs.get("desc", args[1] if len(args) > 1 else None)
        state["_overtime_desc"] = desc if isinstance(desc, str) else None
    state["_overtime_last"] = 0.0
    state["_overtime_open"] = True
    with _lock:
        _open_bars.append(weakref.ref(bar))
    _report(bar, True)


def _counting(bar):
    n = bar.n
    try:
        for item in bar.iterable:
            yield item
            n += 1
            bar.n = n
            if _monotonic() - bar._overtime_last >= _INTERVAL:
                _guard(_report, bar, False)
    finally:
        bar.n = n
        bar.close()   # as tqdm does when an enabled bar's loop ends


# A report skipped by the throttle is sent a moment later by a helper thread, so the last
# value reaches the supervisor even when the bar then sits still for an hour.
_deferred = None
_deferred_ready = threading.Event()
_flusher = None


def _defer(bar):
    global _deferred, _flusher
    _deferred = bar
    if not _deferred_ready.is_set():
        _deferred_ready.set()
        if _flusher is None:
            with _lock:
                if _flusher is None:
                    _flusher = threading.Thread(target=_flush_deferred, name="overtime-tqdm", daemon=True)
                    _flusher.start()


def _flush_deferred():
    global _deferred
    while True:
        _deferred_ready.wait()
        time.sleep(_INTERVAL)
        _deferred_ready.clear()
        bar, _deferred = _deferred, None
        if bar is not None and _tracked(bar):
            _guard(_report, bar, True)


def _closed(bar):
    _report(bar, True)
    bar.__dict__["_overtime_open"] = False
    with _lock:
        _open_bars[:] = [ref for ref in _open_bars if ref() is not None and ref() is not bar]
        top = _innermost()
    if top is not None:
        _report(top, True)   # the outer bar is what moves now


def _innermost():
    for ref in reversed(_open_bars):
        bar = ref()
        if bar is not None and bar.__dict__.get("_overtime_open"):
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


def _report(bar, force):
    now = _monotonic()
    state = bar.__dict__
    if not force and now - state.get("_overtime_last", 0.0) < _INTERVAL:
        _defer(bar)
        return
    state["_overtime_last"] = now
    with _lock:
        top = _innermost()
        outer = [ref() for ref in _open_bars]
    if top is not None and top is not bar:
        _worker.heartbeat()   # an outer bar moved: alive, but the inner bar is the news
        return
    fields = {}
    n = state.get("n")
    if n is not None:
        fields["completed"] = n
    total = state.get("total")
    if total is not None:
        fields["total"] = total
    title = _title(bar)
    if title is None:
        for other in reversed(outer):
            if other is not None and other is not bar and _title(other):
                title = _title(other)
                break
    if title is not None:
        fields["title"] = title
    postfix = state.get("postfix")
    if postfix:
        fields["detail"] = str(postfix)
    _worker.progress(**fields)
