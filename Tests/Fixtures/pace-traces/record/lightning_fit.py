"""A tiny Lightning fit on CPU with no Overtime call, recorded as a pace trace (see
../README.md). Batches of 4 items from a dataset that takes 60 ms an item (data loading
stands in for the step's work): about 0.25 s a step, 16 steps an epoch, a validation of 6
batches after each epoch (Lightning's own loop, reported by the Lightning bridge), and a
real checkpoint written by ModelCheckpoint at each epoch's end. 4 epochs."""

import time

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        time.sleep(0.06)
        x = torch.rand(8)
        return x, x.sum(dim=0, keepdim=True)


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def step(self, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def training_step(self, batch, batch_idx):
        loss = self.step(batch)
        self.log("loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.step(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    import sys
    checkpoints = sys.argv[1]
    trainer = L.Trainer(max_epochs=4, enable_progress_bar=False, enable_model_summary=False, logger=False,
                        callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=checkpoints, save_top_k=-1)],
                        accelerator="cpu", devices=1)
    trainer.fit(Tiny(), DataLoader(Slow(64), batch_size=4), DataLoader(Slow(24), batch_size=4))
    print("job done", flush=True)
