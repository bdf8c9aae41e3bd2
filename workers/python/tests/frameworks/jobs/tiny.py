"""What the Lightning jobs here (and the recorders of Tests/Fixtures/pace-traces) share:
random data served slowly, since data loading stands in for a step's work, and a
one-layer model that learns to sum its input."""

import time

import lightning as L
import torch
from torch.utils.data import Dataset


class Slow(Dataset):
    """`size` items of 8 random numbers and their sum, each taking `seconds` to serve."""

    def __init__(self, size, seconds):
        self.size = size
        self.seconds = seconds

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        time.sleep(self.seconds)
        x = torch.rand(8)
        return x, x.sum(dim=0, keepdim=True)


class Tiny(L.LightningModule):
    """One linear layer; logs `loss` (shown in a bar), `val_loss` and `test_loss`."""

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

    def test_step(self, batch, batch_idx):
        self.log("test_loss", self.step(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
