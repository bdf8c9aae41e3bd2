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
        """Reports Keras' batches to Overtime (added by overtime_worker.keras_bridge).

        Each hook moves its own stage's bar: Keras may call a batch's end hook from its
        executor thread after the next stage (fit's validation) has begun."""

        async_safe = True

        def __init__(self):
            super().__init__()
            self._in_fit = False
            self._epochs = 1
            self._fit = _bars.Steps("keras-fit")
            self._test = None   # fit's validation or evaluate's bar, whichever runs
            self._predict = _bars.Steps("keras-predict")
            self._validation = _bars.Steps("keras-validation")
            self._evaluate = _bars.Steps("keras-evaluate")

        def set_params(self, params):
            super().set_params(params)
            self._epochs = (params or {}).get("epochs") or 1

        def _steps_per_epoch(self):
            return _bars.bounded_total((self.params or {}).get("steps"))

        @staticmethod
        def _step(steps, batch, logs):
            if steps is None:
                return
            steps.detail = (lambda: _bars.metrics_text(logs)) if logs else None
            steps.step(batch + 1)

        def on_train_begin(self, logs=None):
            self._in_fit = True

        def on_train_end(self, logs=None):
            self._in_fit = False
            self._fit.end()

        def on_epoch_begin(self, epoch, logs=None):
            self._fit.begin("Epoch {}/{}".format(epoch + 1, self._epochs), self._steps_per_epoch())

        def on_epoch_end(self, epoch, logs=None):
            self._fit.end()

        def on_train_batch_end(self, batch, logs=None):
            self._step(self._fit, batch, logs)

        def on_test_begin(self, logs=None):
            if self._in_fit:
                # fit's validation, which Keras' own bar keeps silent
                self._test = self._validation
                self._test.begin("Validation", None)
            else:
                self._test = self._evaluate
                self._test.begin("Evaluate", self._steps_per_epoch())

        def on_test_batch_end(self, batch, logs=None):
            self._step(self._test, batch, logs)

        def on_test_end(self, logs=None):
            if self._test is not None:
                self._test.end()

        def on_predict_begin(self, logs=None):
            self._predict.begin("Predict", self._steps_per_epoch())

        def on_predict_batch_end(self, batch, logs=None):
            self._step(self._predict, batch, None)

        def on_predict_end(self, logs=None):
            self._predict.end()

    return OvertimeReporter
