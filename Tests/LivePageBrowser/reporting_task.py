"""A task for the live page's browser tests: reports progress through the worker library
(one step every ``--interval`` seconds, ``--steps`` of them, with ``--title`` and
``--detail``), prints ``--log`` on stdout each step, and, once the file ``--finish-when``
exists, sends ``--result`` as its result and exits 0."""

import argparse
import os
import time

import overtime_worker as ot

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--interval", type=float, default=0.15)
parser.add_argument("--title", default="training")
parser.add_argument("--detail", default="")
parser.add_argument("--log", default="step")
parser.add_argument("--result", default=None)
parser.add_argument("--finish-when", default=None)
options = parser.parse_args()

for step in range(options.steps + 1):
    ot.progress(completed=step, total=options.steps, title=options.title, detail=options.detail)
    print("%s %d" % (options.log, step), flush=True)
    if options.finish_when and os.path.exists(options.finish_when):
        break
    time.sleep(options.interval)
if options.result is not None:
    ot.result({"note": options.result})
