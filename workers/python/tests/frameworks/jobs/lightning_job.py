"""A Lightning job with no Overtime call: a tiny model, random data served 20 ms a batch
(EPOCH_BATCHES a training epoch, 40 by default), a validation set of 50 batches, trained until
JOB_UNTIL (a Unix time), then tested. A validation lasts about a second: several of the 100 ms
slots in which the events file keeps one progress line a task, and of the library's 200 ms bar
interval, so that one validation, all a loaded machine may get to, shows in the events. LIGHTNING_BAR: "none" (default) for enable_progress_bar=False,
or "tqdm:N" for TQDMProgressBar(refresh_rate=N)."""

import os
import time

import lightning as L
from torch.utils.data import DataLoader

from tiny import Slow, Tiny

until = float(os.environ["JOB_UNTIL"])


class StopsAtJobUntil(Tiny):
    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        if time.time() >= until:
            self.trainer.should_stop = True
        return loss


bar = os.environ.get("LIGHTNING_BAR", "none")
callbacks = [] if bar == "none" else [L.pytorch.callbacks.TQDMProgressBar(refresh_rate=int(bar.split(":")[1]))]
trainer = L.Trainer(max_epochs=10000, enable_progress_bar=bar != "none", callbacks=callbacks, enable_model_summary=False,
                    logger=False, enable_checkpointing=False, accelerator="cpu", devices=1)
train_items = 4 * int(os.environ.get("EPOCH_BATCHES", "40"))
trainer.fit(StopsAtJobUntil(), DataLoader(Slow(train_items, 0.005), batch_size=4), DataLoader(Slow(200, 0.005), batch_size=4))
trainer.test(trainer.lightning_module, DataLoader(Slow(40, 0.005), batch_size=4))
print("job done", flush=True)
