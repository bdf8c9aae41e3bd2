"""A plain PyTorch training loop on CPU with a tqdm bar per epoch and no Overtime call,
recorded as a pace trace (see ../README.md). Each step loads 4 items at 60 ms an item
(about 0.25 s); 20 steps an epoch, 4 epochs; after each epoch an evaluation over 40 items
with no bar (silent, about 2.5 s); every 8 steps a checkpoint: torch.save of the model and
optimizer followed by an fsync'd file of 40 MB (here it took about 0.2 s: the checkpoint
barely shows in the trace; the synthesized ones stand for slow ones)."""

import os
import sys

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from tiny import Slow  # workers/python/tests/frameworks/jobs (record.sh puts it on the path)


def checkpoint(directory, step, model, optimizer):
    path = os.path.join(directory, "step{}.pt".format(step))
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    with open(path + ".weights", "wb") as f:
        for _ in range(40):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())


if __name__ == "__main__":
    directory = sys.argv[1]
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train = DataLoader(Slow(80, 0.06), batch_size=4)
    held_out = DataLoader(Slow(40, 0.06), batch_size=4)
    step = 0
    for epoch in range(4):
        for x, y in tqdm(train, desc="epoch {}".format(epoch + 1)):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            if step % 8 == 0:
                checkpoint(directory, step, model, optimizer)
        with torch.no_grad():
            total = sum(torch.nn.functional.mse_loss(model(x), y).item() for x, y in held_out)
        print("epoch {} held-out loss {:.4f}".format(epoch + 1, total), flush=True)
    print("job done", flush=True)
