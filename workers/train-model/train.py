#!/usr/bin/env python3
"""Trains a small neural network (numpy), reporting to Overtime per batch; checkpoints
when warned and when cancelled, and resumes from its checkpoint when run again.

The data is generated (seeded): two noisy concentric rings in the first two of 10
features, which a linear model cannot separate and a one-hidden-layer MLP can.

    overtime run --budget 30s --max-runtime 5s --warn-before 2s -- \\
        python3 workers/train-model/train.py --epochs 20 --batch-delay 0.01
    # cancelled for `deadline` (exit 124) with a checkpoint; run the same again to finish

Under Overtime:
- progress per batch: completed/total batches over the whole run, title "Epoch e/E",
  detail the running loss;
- on `expiring` (overtime run --warn-before) a checkpoint is written at the next batch
  boundary; on cancel (any reason) one is written before exiting 1;
- the result is {"loss", "accuracy", "epochs", "resumed_from"}: resumed_from is the number
  of epochs already done when this run started (0 for a fresh run; the epoch after them
  may be resumed part-way through, at the batch where the checkpoint was taken).
"""
import argparse
import os
import sys
import time

import numpy as np

try:
    import overtime_worker as ot
except ImportError:   # a checkout without `pip install ./workers/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
    import overtime_worker as ot

FEATURES = 10
HIDDEN = 32


def make_data(samples, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, FEATURES))
    label = rng.integers(0, 2, size=samples)
    radius = np.where(label == 1, 2.0, 0.8) + rng.normal(scale=0.25, size=samples)
    angle = rng.uniform(0, 2 * np.pi, size=samples)
    x[:, 0] = radius * np.cos(angle)
    x[:, 1] = radius * np.sin(angle)
    return x, label.astype(np.float64)


class State(object):
    """Weights and position together, replaced whole after each batch, so a Cancelled
    raised anywhere leaves a consistent state to save."""

    __slots__ = ("w1", "b1", "w2", "b2", "epoch", "batch")

    def __init__(self, w1, b1, w2, b2, epoch, batch):
        self.w1, self.b1, self.w2, self.b2 = w1, b1, w2, b2
        self.epoch, self.batch = epoch, batch

    @classmethod
    def fresh(cls, seed):
        rng = np.random.default_rng(seed + 1)
        return cls(rng.normal(scale=np.sqrt(2.0 / FEATURES), size=(FEATURES, HIDDEN)), np.zeros(HIDDEN),
                   rng.normal(scale=np.sqrt(1.0 / HIDDEN), size=HIDDEN), 0.0, 0, 0)

    def save(self, path):
        tmp = path + ".tmp.npz"
        np.savez(tmp, w1=self.w1, b1=self.b1, w2=self.w2, b2=self.b2, epoch=self.epoch, batch=self.batch)
        os.replace(tmp, path)   # a checkpoint is whole or absent, never half-written

    @classmethod
    def load(cls, path):
        with np.load(path) as data:
            return cls(data["w1"], data["b1"], data["w2"], float(data["b2"]), int(data["epoch"]), int(data["batch"]))


def forward(state, x):
    hidden = np.maximum(0.0, x @ state.w1 + state.b1)
    logits = hidden @ state.w2 + state.b2
    return hidden, 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))


def loss_and_accuracy(state, x, y):
    _, p = forward(state, x)
    eps = 1e-9
    loss = -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))
    return float(loss), float(np.mean((p > 0.5) == (y == 1)))


def step(state, x, y, lr, epoch, batch):
    """One SGD step on a batch; returns the new state and the batch loss."""
    hidden, p = forward(state, x)
    eps = 1e-9
    loss = float(-np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)))
    grad_logits = (p - y) / len(y)
    grad_w2 = hidden.T @ grad_logits
    grad_b2 = grad_logits.sum()
    grad_hidden = np.outer(grad_logits, state.w2) * (hidden > 0)
    grad_w1 = x.T @ grad_hidden
    grad_b1 = grad_hidden.sum(axis=0)
    return State(state.w1 - lr * grad_w1, state.b1 - lr * grad_b1, state.w2 - lr * grad_w2,
                 state.b2 - lr * grad_b2, epoch, batch), loss


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20, help="epochs in all (default 20)")
    parser.add_argument("--checkpoint", default="train-checkpoint.npz", help="checkpoint file (default ./train-checkpoint.npz)")
    parser.add_argument("--batch-delay", type=float, default=0.0, metavar="SECONDS",
                        help="sleep per batch, to play a heavier model (default 0)")
    parser.add_argument("--samples", type=int, default=2000, help="training examples (default 2000)")
    parser.add_argument("--batch-size", type=int, default=50, help="examples per batch (default 50)")
    parser.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and the first weights (default 0)")
    parser.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    args = parser.parse_args(argv)

    x, y = make_data(args.samples, args.seed)
    batches = (args.samples + args.batch_size - 1) // args.batch_size
    if os.path.exists(args.checkpoint) and not args.fresh:
        state = State.load(args.checkpoint)
        print("train: resuming from {}: {} epochs done, epoch {} from batch {}".format(
            args.checkpoint, state.epoch, state.epoch + 1, state.batch + 1), flush=True)
    else:
        state = State.fresh(args.seed)
    resumed_from = state.epoch

    warned = []
    ot.on_expiring(lambda remaining: warned.append(remaining))   # saved by the loop, between batches

    def checkpoint(why):
        state.save(args.checkpoint)
        print("train: checkpoint ({}): epoch {}, {} of {} batches -> {}".format(
            why, state.epoch + 1, state.batch, batches, args.checkpoint), flush=True)

    loss = None
    try:
        while state.epoch < args.epochs:
            epoch = state.epoch
            order = np.random.default_rng(args.seed * 1000 + epoch).permutation(args.samples)
            for batch in range(state.batch, batches):
                rows = order[batch * args.batch_size:(batch + 1) * args.batch_size]
                state, loss = step(state, x[rows], y[rows], args.lr, epoch, batch + 1)
                ot.progress(completed=epoch * batches + batch + 1, total=args.epochs * batches,
                            title="Epoch {}/{}".format(epoch + 1, args.epochs), detail="loss {:.4f}".format(loss))
                if warned:
                    del warned[:]
                    checkpoint("expiring")
                if args.batch_delay:
                    time.sleep(args.batch_delay)
            state = State(state.w1, state.b1, state.w2, state.b2, epoch + 1, 0)
    except ot.Cancelled as cancelled:
        checkpoint("cancelled: {}".format(cancelled.reason))
        return 1
    state.save(args.checkpoint)
    loss, accuracy = loss_and_accuracy(state, x, y)
    summary = {"loss": round(loss, 6), "accuracy": round(accuracy, 6), "epochs": args.epochs, "resumed_from": resumed_from}
    ot.result(summary)
    print("train: done: loss {loss:.4f}, accuracy {accuracy:.3f} after {epochs} epochs ({resumed_from} done before this run)"
          .format(**summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
