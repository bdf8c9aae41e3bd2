"""Hugging Face's ``Trainer`` reports every step, with no change to the program and
whatever ``disable_tqdm`` says.

With ``disable_tqdm=True`` (common on clusters, to keep logs clean) the Trainer swaps its
tqdm ``ProgressCallback`` for ``PrinterCallback``, and no bar exists for the tqdm bridge to
hear. So under Overtime the start-up hook runs ``patch_module()`` once
``transformers.trainer_callback`` is first imported, and every ``CallbackHandler`` made
from then on (every ``Trainer``, and those built on it: ``Seq2SeqTrainer``, TRL's) holds
one more callback that reports, on every rank (each its own reporter):

- training as bar ``hf-train``: title ``train``, ``completed`` = the global step of
  ``max_steps``, detail the last logged loss and learning rate;
- each evaluation (and ``predict``) as bar ``hf-eval``: title ``eval``, batches done of
  the evaluation set's length.

HF's own tqdm bars, when shown, still report through the tqdm bridge as before.
``OVERTIME_TRANSFORMERS=0`` (or ``OVERTIME_BRIDGE=0``) turns this off.
"""

from overtime_worker import _bars
from overtime_worker._patching import add_once, run_after

__all__ = ["patch_module"]

# The logged values worth a detail, in the order shown.
_SHOWN = ("loss", "eval_loss", "learning_rate", "grad_norm")


def patch_module(module):
    """The start-up hook's entry: ``module`` is ``transformers.trainer_callback``."""
    handler = getattr(module, "CallbackHandler", None)
    if handler is None or handler.__dict__.get("_overtime_bridge"):
        return False
    reporter = _reporter_class(module.TrainerCallback)
    run_after(handler, "__init__", lambda self: add_once(self.callbacks, reporter))
    handler._overtime_bridge = True
    return True


def _reporter_class(base):
    class OvertimeReporter(base):
        """Reports the Trainer's steps to Overtime (added by overtime_worker.transformers_bridge)."""

        def __init__(self):
            self._train = _bars.Steps("hf-train")
            self._train.detail = self._detail
            self._eval = _bars.Steps("hf-eval")
            self._evaluating = False
            self._logs = {}

        def _detail(self):
            shown = {name: self._logs[name] for name in _SHOWN if name in self._logs}
            return _bars.metrics_text(shown)

        def on_train_begin(self, args, state, control, **kwargs):
            self._train.begin("train", _bars.bounded_total(state.max_steps), state.global_step)

        def on_step_end(self, args, state, control, **kwargs):
            self._train.step(state.global_step, _bars.bounded_total(state.max_steps))

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs:
                self._logs = dict(logs)

        def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
            if not self._evaluating:
                self._evaluating = True
                try:
                    total = len(eval_dataloader) if eval_dataloader is not None else None
                except TypeError:
                    total = None   # an iterable dataset has no length
                self._eval.begin("eval", _bars.bounded_total(total))
            self._eval.step(self._eval.completed + 1)

        def _evaluation_over(self):
            if self._evaluating:
                self._eval.end()
                self._evaluating = False

        def on_evaluate(self, args, state, control, **kwargs):
            self._evaluation_over()

        def on_predict(self, args, state, control, **kwargs):
            self._evaluation_over()

        def on_train_end(self, args, state, control, **kwargs):
            self._train.end()

    return OvertimeReporter
