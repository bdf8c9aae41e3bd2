#!/usr/bin/env python3
"""Writes the synthesized pace traces of this directory (README.md) from the parameters
stated below, with a fixed seed: run again, it writes the same files.

    python3 Tests/Fixtures/pace-traces/synthesize.py
"""

import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))


class Trace(object):
    def __init__(self, name, how, budget=30, seed=1, jitter=0.2):
        self.name, self.how, self.budget = name, how, budget
        self.random = random.Random(seed)
        self.jitter = jitter
        self.t = 0.0
        self.lines = []
        self.hangs = []

    def at(self, seconds, **message):
        self.t += seconds
        self.lines.append(dict(t=round(self.t, 3), **message))

    def step(self, seconds, completed, total, bar="train"):
        """One step of `seconds`, give or take `jitter` of it, then its report."""
        spread = seconds * self.jitter
        self.at(seconds + self.random.uniform(-spread, spread), type="progress", completed=completed, total=total, bar=bar)

    def hang(self, name):
        """A hang right after the last message so far."""
        self.hangs.append({"name": name, "after": self.lines[-1]["t"]})

    def write(self):
        header = {"trace": self.name, "origin": "synthesized", "how": self.how, "budget": self.budget, "hangs": self.hangs}
        with open(os.path.join(HERE, self.name + ".jsonl"), "w") as out:
            for line in [header] + self.lines:
                out.write(json.dumps(line, separators=(",", ":")) + "\n")


def steady():
    t = Trace("steady", "600 steps of 0.2 s, +-20% uniform jitter; the first report 2 s after start (imports)")
    t.at(2.0, type="progress", completed=0, total=600, bar="train")
    for i in range(1, 601):
        t.step(0.2, i, 600)
        if i in (6, 300, 590):
            t.hang({6: "early", 300: "mid-run", 590: "late"}[i])
    t.write()


def slow_first_step():
    t = Trace("slow-first-step", "a first report 2 s after start, a first step of 20 s (compile), then 400 steps of 0.2 s +-20%")
    t.at(2.0, type="progress", completed=0, total=400, bar="train")
    t.hang("before-first-step")
    t.at(20.0, type="progress", completed=1, total=400, bar="train")
    t.hang("after-first-step")
    for i in range(2, 401):
        t.step(0.2, i, 400)
        if i in (20, 200):
            t.hang({20: "early", 200: "mid-run"}[i])
    t.write()


def epochs(name, how, boundary):
    """5 epochs of 150 steps of 0.2 s +-20%, a silent 10 s evaluation after each, marked by
    `boundary`: "none", "phase" (phase messages eval / train), "phase-window" (the eval
    phase message carries "window": 20) or "bar" (the epoch's bar closes before it)."""
    t = Trace(name, how)
    t.at(2.0, type="progress", completed=0, total=150, bar="train")
    for epoch in range(5):
        for i in range(1, 151):
            t.step(0.2, i, 150)
            if epoch == 0 and i == 6:
                t.hang("early")
            if epoch == 2 and i == 75:
                t.hang("mid-epoch")
            if epoch == 2 and i == 1:
                t.hang("after-evaluation")
        if boundary == "bar":
            t.at(0.001, type="progress", completed=150, total=150, bar="train", closed=True)
        elif boundary == "phase":
            t.at(0.001, type="phase", name="eval")
        elif boundary == "phase-window":
            t.at(0.001, type="phase", name="eval", window=20)
        if epoch == 1:
            t.hang("in-evaluation")
        t.at(10.0 + t.random.uniform(-0.5, 0.5), **({"type": "phase", "name": "train"} if boundary.startswith("phase")
                                                     else {"type": "progress", "completed": 0, "total": 150, "bar": "train"}))
    t.write()


def checkpoints(name, how, marked):
    """800 steps of 0.2 s +-20%; after every 200th a 5 s checkpoint, in a `checkpoint` phase
    when `marked`."""
    t = Trace(name, how)
    t.at(2.0, type="progress", completed=0, total=800, bar="train")
    for i in range(1, 801):
        t.step(0.2, i, 800)
        if i == 6:
            t.hang("early")
        if i == 300:
            t.hang("mid-run")
        if i == 401:
            t.hang("after-checkpoint")
        if i % 200 == 0 and i < 800:
            if marked:
                t.at(0.001, type="phase", name="checkpoint")
            if i == 400:
                t.hang("in-checkpoint")
            t.at(5.0 + t.random.uniform(-0.5, 0.5), **({"type": "phase", "name": "train"} if marked else
                                                         {"type": "heartbeat"}))
    t.write()


def drifting_pace():
    t = Trace("drifting-pace", "1000 steps whose length grows evenly from 0.2 s to 1.0 s (+-20%)")
    t.at(2.0, type="progress", completed=0, total=1000, bar="train")
    for i in range(1, 1001):
        t.step(0.2 + 0.8 * i / 1000, i, 1000)
        if i in (6, 500, 990):
            t.hang({6: "early", 500: "mid-run", 990: "late"}[i])
    t.write()


def pace_change(name, after):
    t = Trace(name, "300 steps of 0.2 s, then 300 of {} s (+-20%): the pace changes at once".format(after))
    t.at(2.0, type="progress", completed=0, total=600, bar="train")
    for i in range(1, 601):
        t.step(0.2 if i <= 300 else after, i, 600)
        if i in (6, 150, 450):
            t.hang({6: "early", 150: "before-change", 450: "after-change"}[i])
    t.write()


def hiccups():
    t = Trace("steady-hiccups", "800 steps of 0.2 s +-20%; every 200th takes 1.5 s (a log flush, a data loader refilling)")
    t.at(2.0, type="progress", completed=0, total=800, bar="train")
    for i in range(1, 801):
        t.step(1.5 if i % 200 == 0 else 0.2, i, 800)
        if i in (6, 300, 700):
            t.hang({6: "early", 300: "mid-run", 700: "late"}[i])
    t.write()


if __name__ == "__main__":
    steady()
    slow_first_step()
    epochs("epochs-eval-bare", "5 epochs of 150 steps of 0.2 s +-20%, a silent 10 s evaluation after each, unmarked", "none")
    epochs("epochs-eval-phase", "as epochs-eval-bare, the evaluation in an `eval` phase (phase messages eval / train)", "phase")
    epochs("epochs-eval-phase-window", "as epochs-eval-phase, the eval phase message carrying \"window\": 20", "phase-window")
    epochs("epochs-eval-bar", "as epochs-eval-bare, the epoch's bar closed before the evaluation (as tqdm/Lightning do)", "bar")
    checkpoints("checkpoint-bare", "800 steps of 0.2 s +-20%, a 5 s checkpoint after every 200th, unmarked", False)
    checkpoints("checkpoint-phase", "as checkpoint-bare, each checkpoint in a `checkpoint` phase", True)
    drifting_pace()
    pace_change("pace-change-2x", 0.4)
    pace_change("pace-change-4x", 0.8)
    pace_change("pace-change-6x", 1.2)
    hiccups()
