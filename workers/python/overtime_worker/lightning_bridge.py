"""PyTorch Lightning's ``TQDMProgressBar`` reports every step, whatever its ``refresh_rate``.

Lightning moves its tqdm bars only every ``refresh_rate`` steps (and at the end of an
epoch): with ``TQDMProgressBar(refresh_rate=1000)`` and fewer batches than that, a whole
epoch passes with no sign of work, and the tqdm bridge (``tqdm_bridge``) hears nothing.
After ``lightning.pytorch.callbacks.progress.tqdm_progress`` (or the older
``pytorch_lightning`` one) is first imported, its batch-end hooks also set the bar's count
for every batch, without a redraw: the terminal is redrawn as Lightning chose, and the
count reaches Overtime through the tqdm bridge, throttled as any bar's. Turned off with
the tqdm bridge (``OVERTIME_TQDM=0``, ``OVERTIME_BRIDGE=0``).
"""

__all__ = ["patch_module"]

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
