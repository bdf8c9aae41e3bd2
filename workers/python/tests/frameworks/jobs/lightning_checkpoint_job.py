"""A Lightning fit with no Overtime call but the opt-in CheckpointOnAdvice: a tiny model,
random data served 5 ms an item (EPOCH_BATCHES a training epoch, 10 by default), a
validation set (VALIDATION_BATCHES batches, 4 by default; each validation step sleeps
VALIDATION_SLEEP seconds, 0 by default), Lightning's default ModelCheckpoint in the working
directory, MAX_EPOCHS epochs (2 by default), then a test. ADVICE_DIR set:
CheckpointOnAdvice(dirpath=ADVICE_DIR) is among the callbacks. HANG_AT_STEP set: the
training step at that global step hangs (sleeps 60 s). Says how far the fit went, and what
CheckpointOnAdvice saved."""

import os
import time

import lightning as L
from torch.utils.data import DataLoader

from tiny import Slow, Tiny


validation_sleep = float(os.environ.get("VALIDATION_SLEEP", "0"))
hang_at_step = int(os.environ.get("HANG_AT_STEP", "-1"))


class Hanging(Tiny):
    def training_step(self, batch, batch_idx):
        if self.trainer.global_step == hang_at_step:
            print("hanging at step {}".format(hang_at_step), flush=True)
            time.sleep(60)
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch, batch_idx):
        time.sleep(validation_sleep)
        super().validation_step(batch, batch_idx)


advised = None
if os.environ.get("ADVICE_DIR"):
    from overtime_worker.lightning_bridge import CheckpointOnAdvice
    advised = CheckpointOnAdvice(dirpath=os.environ["ADVICE_DIR"])
trainer = L.Trainer(max_epochs=int(os.environ.get("MAX_EPOCHS", "2")), enable_progress_bar=False, callbacks=[] if advised is None else [advised],
                    enable_model_summary=False, logger=False, accelerator="cpu", devices=1, num_sanity_val_steps=2)
train_items = 4 * int(os.environ.get("EPOCH_BATCHES", "10"))
validation_items = 4 * int(os.environ.get("VALIDATION_BATCHES", "4"))
trainer.fit(Hanging(), DataLoader(Slow(train_items, 0.005), batch_size=4), DataLoader(Slow(validation_items, 0.005), batch_size=4))
print("fit ended at epoch {} step {}".format(trainer.current_epoch, trainer.global_step), flush=True)
if advised is not None:
    print("advice checkpoint {}".format(advised.path), flush=True)
trainer.test(trainer.lightning_module, DataLoader(Slow(16, 0.005), batch_size=4), verbose=False)
print("job done", flush=True)
