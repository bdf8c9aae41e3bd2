"""PyTorch Lightning's loops report every batch: through its ``TQDMProgressBar`` whatever
its ``refresh_rate``, and with no progress bar at all (``patch_connector``).

Lightning moves its tqdm bars only every ``refresh_rate`` steps (and at the end of an
epoch): with ``TQDMProgressBar(refresh_rate=1000)`` and fewer batches than that, a whole
epoch passes with no sign of work, and the tqdm bridge (``tqdm_bridge``) hears nothing.
After ``lightning.pytorch.callbacks.progress.tqdm_progress`` (or the older
``pytorch_lightning`` one) is first imported, its batch-end hooks also set the bar's count
for every batch, without a redraw: the terminal is redrawn as Lightning chose, and the
count reaches Overtime through the tqdm bridge, throttled as any bar's. Turned off with
the tqdm bridge (``OVERTIME_TQDM=0``) or ``OVERTIME_LIGHTNING=0`` (or ``OVERTIME_BRIDGE=0``).
"""

from overtime_worker._patching import add_once, run_after

__all__ = ["patch_module", "patch_connector"]

# hook -> the callback's attribute holding that stage's bar
_HOOKS = {
    "on_train_batch_end": "train_progress_bar",
    "on_validation_batch_end": "val_progress_bar",
    "on_test_batch_end": "test_progress_bar",
    "on_predict_batch_end": "predict_progress_bar",
}


def patch_module(module):
    """The start-up hook's entry: ``module`` is Lightning's ``tqdm_progress``, just executed."""
    callback = getattr(module, "TQDMProgressBar", None)
    if callback is None or callback.__dict__.get("_overtime_bridge"):
        return False
    for hook, attribute in _HOOKS.items():
        original = getattr(callback, hook, None)
        if original is not None:
            setattr(callback, hook, _counting(original, attribute))
    callback._overtime_bridge = True
    return True


def _counting(original, attribute):
    def hook(self, trainer, pl_module, outputs, batch, batch_idx, *args, **kwargs):
        result = original(self, trainer, pl_module, outputs, batch, batch_idx, *args, **kwargs)
        try:
            bar = getattr(self, "_" + attribute, None) or getattr(self, attribute, None)
            # Lightning's own count for the batch just done; the bridged tqdm hears the
            # assignment. No refresh: the screen is redrawn when Lightning says.
            if bar is not None and not bar.disable and "_overtime" in bar.__dict__ and bar.n != batch_idx + 1:
                bar.n = batch_idx + 1
        except Exception:
            pass
        return result
    hook.__name__ = original.__name__
    hook.__doc__ = original.__doc__
    hook.__wrapped__ = original
    return hook


def patch_connector(module):
    """The start-up hook's entry for Lightning with no progress bar: ``module`` is
    Lightning's ``callback_connector``, just executed. A Trainer made with
    ``enable_progress_bar=False`` (or with no bar callback) gets a callback that reports
    its loops: bar ``lightning-train`` (title ``Epoch i/n``, batches of the epoch, detail
    the metrics logged with ``prog_bar=True``), ``lightning-validation`` (``Sanity
    Checking`` first, as Lightning's bar calls it), ``lightning-test`` and
    ``lightning-predict``. A Trainer with a bar reports through its tqdm or rich bar, as
    before. Turned off by ``OVERTIME_LIGHTNING=0``."""
    connector = getattr(module, "_CallbackConnector", None)
    base = getattr(module, "Callback", None)
    if connector is None or base is None or connector.__dict__.get("_overtime_bridge"):
        return False
    reporter = _loops_reporter_class(base)

    def add_unless_a_bar_reports(self):
        if self.trainer.progress_bar_callback is None:
            add_once(self.trainer.callbacks, reporter)

    run_after(connector, "_configure_progress_bar", add_unless_a_bar_reports)
    connector._overtime_bridge = True
    return True


def _loops_reporter_class(base):
    from overtime_worker import _bars

    def batches(value):
        if isinstance(value, (list, tuple)):
            totals = [_bars.bounded_total(v) for v in value]
            return None if None in totals else sum(totals)
        return _bars.bounded_total(value)

    class OvertimeLoopsReporter(base):
        """Reports Lightning's loops to Overtime when no progress bar does
        (added by overtime_worker.lightning_bridge)."""

        def __init__(self):
            self._stages = {}

        def _begin(self, trainer, kind, title, total):
            steps = self._stages.get(kind)
            if steps is None:
                steps = self._stages[kind] = _bars.Steps(kind)
                steps.detail = lambda: _bars.metrics_text(dict(trainer.progress_bar_metrics))
            steps.begin(title, total)

        def _step(self, kind):
            steps = self._stages.get(kind)
            if steps is not None:
                steps.step(steps.completed + 1)

        def _end(self, kind):
            steps = self._stages.get(kind)
            if steps is not None:
                steps.end()

        def on_train_epoch_start(self, trainer, pl_module):
            epochs = trainer.max_epochs
            title = "Epoch {}/{}".format(trainer.current_epoch + 1, epochs) if epochs and epochs > 0 \
                else "Epoch {}".format(trainer.current_epoch + 1)
            self._begin(trainer, "lightning-train", title, batches(trainer.num_training_batches))

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self._step("lightning-train")

        def on_train_epoch_end(self, trainer, pl_module):
            self._end("lightning-train")

        def on_validation_start(self, trainer, pl_module):
            title = "Sanity Checking" if trainer.sanity_checking else "Validation"
            total = trainer.num_sanity_val_batches if trainer.sanity_checking else trainer.num_val_batches
            self._begin(trainer, "lightning-validation", title, batches(total))

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            self._step("lightning-validation")

        def on_validation_end(self, trainer, pl_module):
            self._end("lightning-validation")

        def on_test_start(self, trainer, pl_module):
            self._begin(trainer, "lightning-test", "Testing", batches(trainer.num_test_batches))

        def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            self._step("lightning-test")

        def on_test_end(self, trainer, pl_module):
            self._end("lightning-test")

        def on_predict_start(self, trainer, pl_module):
            self._begin(trainer, "lightning-predict", "Predicting", batches(trainer.num_predict_batches))

        def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            self._step("lightning-predict")

        def on_predict_end(self, trainer, pl_module):
            self._end("lightning-predict")

    return OvertimeLoopsReporter
