"""rich progress bars report to Overtime, with no change to the program.

Under Overtime the start-up hook arranges for ``patch()`` to run when ``rich.progress``
is first imported (rich itself is never imported by the hook). Then every task of every
``rich.progress.Progress`` — ``add_task``, ``update``, ``advance``, ``reset``,
``Progress.track`` and ``rich.progress.track`` — reports as its own bar,
``"bar": "rich-<n>"``, with its ``completed``, ``total`` and description (markup
removed) as ``title``. That covers PyTorch Lightning's ``RichProgressBar``, which Lightning
picks when rich is installed.

Reports follow the updates, not the redraw (a ``Progress`` that is disabled or never
refreshed reports too), at most one message per task every 0.2 s with the latest always
within about that time (see ``overtime_worker._bars``); adding, resetting and renaming a
task report at once. Nothing here ever raises into the program.

Without the start-up hook, call ``patch()`` after importing rich.
``OVERTIME_RICH=0`` (or ``OVERTIME_BRIDGE=0``) turns the hook's bridge off.
"""

import weakref

import overtime_worker as _worker
from overtime_worker import _bars

__all__ = ["patch"]


def patch_module(module):
    """The start-up hook's entry: ``module`` is ``rich.progress``, just executed."""
    return patch(module.Progress)


def patch(progress_class=None):
    """Makes ``progress_class`` (default: ``rich.progress.Progress``, which
    ``rich.progress.track`` and Lightning's bar use) report to Overtime. Returns False
    when it was patched already."""
    if progress_class is None:
        from rich.progress import Progress as progress_class
    if progress_class.__dict__.get("_overtime_bridge"):
        return False
    original = {name: getattr(progress_class, name)
                for name in ("add_task", "update", "advance", "reset", "remove_task")}

    def add_task(self, *args, **kwargs):
        task_id = original["add_task"](self, *args, **kwargs)
        if _worker._current() is not None:
            try:
                _added(self, task_id)
            except Exception:
                pass
        return task_id

    def update(self, task_id, *args, **kwargs):
        value = original["update"](self, task_id, *args, **kwargs)
        _moved(self, task_id, kwargs.get("description") is not None)
        return value

    def advance(self, task_id, *args, **kwargs):
        value = original["advance"](self, task_id, *args, **kwargs)
        _moved(self, task_id, False)
        return value

    def reset(self, task_id, *args, **kwargs):
        value = original["reset"](self, task_id, *args, **kwargs)
        _moved(self, task_id, True)
        return value

    def remove_task(self, task_id):
        bars = self.__dict__.get("_overtime_bars")
        bar = bars.pop(task_id, None) if bars else None
        if bar is not None:
            try:
                _bars.send(bar)
            except Exception:
                pass
            bar.open = False
        return original["remove_task"](self, task_id)

    for function, name in ((add_task, "add_task"), (update, "update"), (advance, "advance"),
                           (reset, "reset"), (remove_task, "remove_task")):
        function.__name__ = name
        function.__doc__ = original[name].__doc__
        function.__wrapped__ = original[name]
        setattr(progress_class, name, function)
    progress_class._overtime_bridge = True
    return True


def _added(progress, task_id):
    bars = progress.__dict__.setdefault("_overtime_bars", {})
    reference = weakref.ref(progress)
    bar = _bars.Bar("rich", lambda: _fields(reference(), task_id))
    bars[task_id] = bar
    _bars.send(bar)


def _moved(progress, task_id, force):
    bars = progress.__dict__.get("_overtime_bars")
    if not bars:
        return
    bar = bars.get(task_id)
    if bar is None or not bar.open:
        return
    if force:
        _bars.send(bar)
    elif not bar.deferred:
        _bars.updated(bar)


def _plain(description):
    try:
        from rich.text import Text
        return Text.from_markup(description).plain
    except Exception:
        return description


def _fields(progress, task_id):
    fields = {}
    task = None if progress is None else progress._tasks.get(task_id)
    if task is None:
        return fields
    fields["completed"] = task.completed
    if task.total is not None:
        fields["total"] = task.total
    description = task.description
    if isinstance(description, str) and description.strip():
        fields["title"] = _plain(description).strip()
    return fields
