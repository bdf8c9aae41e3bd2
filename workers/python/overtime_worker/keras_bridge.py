"""Keras 3's ``fit``, ``evaluate`` and ``predict`` report every batch, with no change to
the program and whatever ``verbose`` says.

Keras draws its own progress bar (``Progbar``, not tqdm), and with ``verbose=2`` draws
nothing until an epoch ends; with ``verbose=0`` nothing at all. So under Overtime the
start-up hook runs ``patch_module()`` once ``keras.src.callbacks.callback_list`` is first
imported, and from then on every ``CallbackList`` Keras makes (one per ``fit``,
``evaluate``, ``predict``, and any custom loop's) also holds a callback that reports:

- in ``fit``: bar ``keras-fit``, title ``Epoch i/n``, ``completed`` of ``total`` batches of
  the epoch, detail the batch's logged metrics (``loss 0.231 · accuracy 0.91``); its
  validation (silent in Keras' own bar) as bar ``keras-validation``;
- ``evaluate`` and ``predict``: bars ``keras-evaluate`` and ``keras-predict``.

Keras hands callbacks its logs as Python numbers already; the detail is formatted only when
a message goes out (at most one per bar every 0.2 s). The callback is marked safe for
Keras' asynchronous dispatch, so it never makes Keras wait for it. ``OVERTIME_KERAS=0``
(or ``OVERTIME_BRIDGE=0``) turns it off.
"""

from overtime_worker import _bars
from overtime_worker._patching import add_once, run_after

__all__ = ["patch_module"]


def patch_module(module):
    """The start-up hook's entry: ``module`` is ``keras.src.callbacks.callback_list``."""
    callback_list = getattr(module, "CallbackList", None)
    if callback_list is None or callback_list.__dict__.get("_overtime_bridge"):
        return False
    reporter = _reporter_class(module.Callback)
    run_after(callback_list, "_add_default_callbacks", lambda self: add_once(self.callbacks, reporter))
    callback_list._overtime_bridge = True
    return True


def _reporter_class(base):
    class OvertimeReporter(base):
        """Reports Keras' batches to Overtime (added by overtime_worker.keras_bridge)."""

        async_safe = True

        def __init__(self):
            super().__init__()
            self._in_fit = False
            self._epochs = 1
            self._bars = {}      # kind -> its Steps, one bar each for the whole call
            self._stage = None   # the Steps being moved
            self._fit = None

        def set_params(self, params):
            super().set_params(params)
            self._epochs = (params or {}).get("epochs") or 1

        def _begin(self, kind, title, total):
            steps = self._bars.get(kind)
            if steps is None:
                steps = self._bars[kind] = _bars.Steps(kind)
            steps.begin(title, total)
            self._stage = steps
            return steps

        def _steps_per_epoch(self):
            return _bars.bounded_total((self.params or {}).get("steps"))

        def _step(self, batch, logs):
            steps = self._stage
            if steps is None:
                return
            steps.detail = (lambda: _bars.metrics_text(logs)) if logs else None
            steps.step(batch + 1)

        def _end(self):
            if self._stage is not None:
                self._stage.end()
                self._stage = None

        def on_train_begin(self, logs=None):
            self._in_fit = True

        def on_train_end(self, logs=None):
            self._in_fit = False
            self._end()

        def on_epoch_begin(self, epoch, logs=None):
            self._fit = self._begin("keras-fit", "Epoch {}/{}".format(epoch + 1, self._epochs), self._steps_per_epoch())

        def on_epoch_end(self, epoch, logs=None):
            self._stage = self._fit
            self._end()

        def on_train_batch_end(self, batch, logs=None):
            self._step(batch, logs)

        def on_test_begin(self, logs=None):
            if self._in_fit:
                # fit's validation (Keras' own bar stays silent): its own bar, and back
                # to the epoch's after it
                self._begin("keras-validation", "Validation", None)
            else:
                self._begin("keras-evaluate", "Evaluate", self._steps_per_epoch())

        def on_test_batch_end(self, batch, logs=None):
            self._step(batch, logs)

        def on_test_end(self, logs=None):
            self._end()
            if self._in_fit:
                self._stage = self._fit

        def on_predict_begin(self, logs=None):
            self._begin("keras-predict", "Predict", self._steps_per_epoch())

        def on_predict_batch_end(self, batch, logs=None):
            self._step(batch, None)

        def on_predict_end(self, logs=None):
            self._end()

    return OvertimeReporter
