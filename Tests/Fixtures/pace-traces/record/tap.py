#!/usr/bin/env python3
"""Runs a job with a channel of its own on fd 3 (OVERTIME_FD=3, a Unix stream socket whose
peer is its parent, as `overtime run` gives one) and writes what the job sends on it as a
pace trace (../README.md): each line as the job wrote it, plus `t`, the seconds from the
job's start when it arrived. Nothing is thinned: these are the messages the task machine
gets. The job's output goes to stderr.

    tap.py NAME "HOW IT WAS RECORDED" COMMAND [ARG...] > NAME.jsonl
    tap.py --hangs NAME.jsonl      (picks a trace's hang points again, in place)
"""

import json
import os
import socket
import subprocess
import sys
import time


# Covers the job's start to its first report (the imports: about 2.5 s here).
BUDGET = 10


def hang_points(lines):
    """early: after the 6th message; mid-run: after the message halfway through the trace;
    at-boundary: after the first bars closed past the middle (what follows them is an
    epoch's end: an evaluation, a checkpoint); after-evaluation: after the next message but
    one."""
    middle = next(i for i in range(len(lines) // 2, len(lines)) if not lines[i].get("closed"))
    closed = next(i for i in range(middle, len(lines)) if lines[i].get("closed"))
    while lines[closed + 1].get("closed"):
        closed += 1
    return [{"name": "early", "after": lines[5]["t"]},
            {"name": "mid-run", "after": lines[middle]["t"]},
            {"name": "at-boundary", "after": lines[closed]["t"]},
            {"name": "after-evaluation", "after": lines[closed + 2]["t"]}]


def rehang(path):
    with open(path) as f:
        header, *lines = [json.loads(line) for line in f]
    header["hangs"] = hang_points(lines)
    with open(path, "w") as f:
        for line in [header] + lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")


def main():
    if sys.argv[1] == "--hangs":
        return rehang(sys.argv[2])
    name, how, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    ours, theirs = socket.socketpair()
    # The job's end must be fd 3 exactly; ours must not be.
    if ours.fileno() == 3:
        moved = socket.socket(fileno=os.dup(ours.fileno()))
        ours.close()
        ours = moved
    os.dup2(theirs.fileno(), 3)
    theirs.close()
    env = dict(os.environ, OVERTIME_FD="3", OVERTIME_TASK=name, OVERTIME_RUN="tap")
    start = time.monotonic()
    job = subprocess.Popen(command, env=env, pass_fds=(3,), stdout=sys.stderr)
    os.close(3)
    lines, pending = [], b""
    while True:
        data = ours.recv(65536)
        if not data:
            break
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            message = json.loads(line)
            lines.append(dict(t=round(time.monotonic() - start, 3), **message))
    if job.wait() != 0:
        sys.exit("tap.py: the job exited {}".format(job.returncode))
    header = {"trace": name, "origin": "recorded", "how": how, "budget": BUDGET, "hangs": hang_points(lines)}
    for line in [header] + lines:
        print(json.dumps(line, separators=(",", ":")))


if __name__ == "__main__":
    main()
