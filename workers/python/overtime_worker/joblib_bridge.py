"""joblib's ``Parallel`` reports its tasks done, with no change to the program and
whatever ``verbose`` says.

joblib's own progress is plain text on stderr, and only with ``verbose`` set. But after
every batch of tasks it completes, on every backend (loky, multiprocessing, threading,
sequential, dask's), ``Parallel`` calls its ``print_progress()``, which returns at once
when ``verbose`` is 0. Under Overtime the start-up hook runs ``patch_module()`` once
``joblib.parallel`` is first imported, and from then on each call of a ``Parallel`` reports
as one bar (``joblib-<n>``, one per ``Parallel`` object), title ``joblib.Parallel``:
``completed`` the tasks done, ``total`` the tasks in the input when joblib knows it, else
those dispatched so far. The bar closes when the last task is done (or, for a call that
returns a list, when it returns with every result).

What each task does inside its worker process reports on its own (a tqdm bar there
connects to the task's socket). ``OVERTIME_JOBLIB=0`` (or ``OVERTIME_BRIDGE=0``) turns
this off.
"""

from overtime_worker import _bars
from overtime_worker._patching import run_after

__all__ = ["patch_module"]


def patch_module(module):
    """The start-up hook's entry: ``module`` is ``joblib.parallel``."""
    parallel = getattr(module, "Parallel", None)
    if parallel is None or parallel.__dict__.get("_overtime_bridge"):
        return False
    original_call = parallel.__call__

    def __call__(self, *args, **kwargs):
        self.__dict__["_overtime_new_call"] = True
        output = original_call(self, *args, **kwargs)
        if isinstance(output, list):
            try:
                _all_done(self)
            except Exception:
                pass
        return output

    __call__.__wrapped__ = original_call
    __call__.__doc__ = original_call.__doc__
    parallel.__call__ = __call__
    run_after(parallel, "print_progress", _report)
    parallel._overtime_bridge = True
    return True


def _report(parallel):
    state = parallel.__dict__
    done = state.get("n_completed_tasks", 0)
    dispatched = state.get("n_dispatched_tasks", 0)
    total = _bars.bounded_total(state.get("n_tasks")) or dispatched
    steps = state.get("_overtime_steps")
    if steps is None:
        steps = state["_overtime_steps"] = _bars.Steps("joblib")
    if state.pop("_overtime_new_call", False):
        steps.begin("joblib.Parallel", total, done)
    else:
        steps.step(done, total)
    if done >= dispatched and state.get("_original_iterator") is None:
        steps.end()


def _all_done(parallel):
    # Every result is in: the bar closes at its full count, even when the callback of the
    # last batch (a thread of joblib's) has not told print_progress yet.
    steps = parallel.__dict__.get("_overtime_steps")
    if steps is not None and steps.bar.open:
        dispatched = parallel.__dict__.get("n_dispatched_tasks", 0)
        steps.step(dispatched, dispatched)
        steps.end()
