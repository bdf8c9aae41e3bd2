"""A tiny Lightning fit on CPU with no Overtime call, recorded as a pace trace (see
../README.md). Batches of 4 items from a dataset that takes 60 ms an item (data loading
stands in for the step's work): about 0.25 s a step, 16 steps an epoch, a validation of 6
batches after each epoch (Lightning's own loop, reported by the Lightning bridge), and a
real checkpoint written by ModelCheckpoint at each epoch's end. 4 epochs."""

import lightning as L
from torch.utils.data import DataLoader

from tiny import Slow, Tiny  # workers/python/tests/frameworks/jobs (record.sh puts it on the path)


if __name__ == "__main__":
    import sys
    checkpoints = sys.argv[1]
    trainer = L.Trainer(max_epochs=4, enable_progress_bar=False, enable_model_summary=False, logger=False,
                        callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=checkpoints, save_top_k=-1)],
                        accelerator="cpu", devices=1)
    trainer.fit(Tiny(), DataLoader(Slow(64, 0.06), batch_size=4), DataLoader(Slow(24, 0.06), batch_size=4))
    print("job done", flush=True)
