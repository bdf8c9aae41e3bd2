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

Every Trainer also says which of Lightning's phases it is in (``overtime_worker.phase``):
``sanity-check``, ``train``, ``validation``, ``checkpoint`` (while ``Trainer.save_checkpoint``
runs, which is how ``ModelCheckpoint`` saves), ``test``, ``predict`` and ``teardown``; when
``fit``, ``validate``, ``test`` or ``predict`` returns, the phase before it is in force again.
Turned off by ``OVERTIME_LIGHTNING=0``.

``CheckpointOnAdvice``, a callback the program adds itself, saves a checkpoint and stops the
fit when Overtime advises it (``overtime_worker.on_checkpoint_advice``).
"""

import os
import sys

import overtime_worker as _worker
from overtime_worker import _phases
from overtime_worker._patching import add_once, run_after

__all__ = ["patch_module", "patch_connector", "patch_trainer", "CheckpointOnAdvice"]

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
    phases = _phases_class(base)

    def add_callbacks(self):
        add_once(self.trainer.callbacks, phases)
        if self.trainer.progress_bar_callback is None:
            add_once(self.trainer.callbacks, reporter)

    run_after(connector, "_configure_progress_bar", add_callbacks)
    connector._overtime_bridge = True
    return True


def patch_trainer(module):
    """The start-up hook's entry for phases: ``module`` is Lightning's ``trainer.trainer``,
    just executed. ``save_checkpoint`` runs in phase ``checkpoint``; ``fit``, ``validate``,
    ``test`` and ``predict`` end in the phase they began in."""
    trainer = getattr(module, "Trainer", None)
    if trainer is None or trainer.__dict__.get("_overtime_bridge"):
        return False
    for name, wrap in (("save_checkpoint", _phases.phase("checkpoint")), ("fit", None), ("validate", None),
                       ("test", None), ("predict", None)):
        original = getattr(trainer, name, None)
        if original is not None:
            setattr(trainer, name, wrap(original) if wrap is not None else _restoring(original))
    trainer._overtime_bridge = True
    return True


def _restoring(original):
    def method(self, *args, **kwargs):
        with _phases.restoring():
            return original(self, *args, **kwargs)
    method.__name__ = original.__name__
    method.__doc__ = original.__doc__
    method.__wrapped__ = original
    return method


def _phases_class(base):
    def fitting(trainer):
        return getattr(trainer.state, "fn", None) == "fit" and not trainer.sanity_checking

    class OvertimePhases(base):
        """Says which of Lightning's phases the Trainer is in (added by
        overtime_worker.lightning_bridge); only a change is sent."""

        def on_sanity_check_start(self, trainer, pl_module):
            _worker.set_phase("sanity-check")

        def on_train_epoch_start(self, trainer, pl_module):
            _worker.set_phase("train")

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            _worker.set_phase("train")   # back from a validation within the epoch

        def on_validation_start(self, trainer, pl_module):
            if not trainer.sanity_checking:
                _worker.set_phase("validation")

        def on_validation_end(self, trainer, pl_module):
            # Before ModelCheckpoint's own on_validation_end (Lightning runs checkpoint
            # callbacks last): the rest of the epoch, save included, is training's.
            if fitting(trainer):
                _worker.set_phase("train")

        def on_test_start(self, trainer, pl_module):
            _worker.set_phase("test")

        def on_predict_start(self, trainer, pl_module):
            _worker.set_phase("predict")

        def on_fit_end(self, trainer, pl_module):
            _worker.set_phase("teardown")

        def teardown(self, trainer, pl_module, stage):
            _worker.set_phase("teardown")

    return OvertimePhases


def __getattr__(name):
    # CheckpointOnAdvice derives from the Callback of the Lightning the program uses, which
    # is known only when the program asks for it.
    if name != "CheckpointOnAdvice":
        raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
    cls = globals().get("_checkpoint_on_advice")
    if cls is None:
        cls = globals()["_checkpoint_on_advice"] = _checkpoint_on_advice_class(_lightning_callback())
    return cls


def _lightning_callback():
    for package in ("lightning.pytorch", "pytorch_lightning"):
        if package in sys.modules:
            return sys.modules[package].Callback
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback
    return Callback


def _checkpoint_on_advice_class(base):
    class CheckpointOnAdvice(base):
        """Saves a checkpoint and stops the fit when Overtime advises a checkpoint.

        At the end of the first training batch after the advice came, every rank calls
        ``trainer.save_checkpoint`` with ``<dirpath>/overtime-advice-epoch=E-step=S.ckpt``
        (``dirpath``: by default the ``ModelCheckpoint``'s directory, else the Trainer's
        ``default_root_dir``), rank 0 says so on stderr, and ``trainer.should_stop`` ends
        the fit as ``EarlyStopping`` would (not before ``min_epochs``/``min_steps``). Under
        DDP the ranks agree first (one rank advised is enough). ``path`` is the file saved,
        None until then. Outside Overtime it does nothing.
        """

        def __init__(self, dirpath=None):
            super().__init__()
            self.dirpath = dirpath
            self.path = None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if self.path is not None or not _worker.active():
                return
            advice = _worker.checkpoint_advised()
            advised = advice is not None
            if trainer.world_size > 1:
                advised = trainer.strategy.reduce_boolean_decision(advised, all=False)
            if not advised:
                return
            directory = self.dirpath or getattr(trainer.checkpoint_callback, "dirpath", None) or trainer.default_root_dir
            path = os.path.join(str(directory), "overtime-advice-epoch={}-step={}.ckpt".format(
                trainer.current_epoch, trainer.global_step))
            trainer.save_checkpoint(path)
            self.path = path
            trainer.should_stop = True
            if trainer.is_global_zero:
                why = " ({})".format(advice.why) if advice is not None and advice.why else ""
                sys.stderr.write("overtime_worker: Overtime advised a checkpoint{}: saved {}; stopping the fit\n"
                                 .format(why, path))
                sys.stderr.flush()

    return CheckpointOnAdvice


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
