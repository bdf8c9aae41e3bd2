#!/usr/bin/env bash
# Records the recorded pace traces of ../ (README.md there): each job runs in the
# frameworks' venv (scripts/frameworks-venv) with this checkout's worker library on
# PYTHONPATH (its bridges report the frameworks' loops, as under `overtime run`), with the
# frameworks tests' tiny.py beside it, its channel tapped by tap.py.
#
#   Tests/Fixtures/pace-traces/record/record.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
python=$("$root/scripts/frameworks-venv" | tail -n 1)/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

record() {
  local name=$1 how=$2 script=$3
  mkdir -p "$work/$name"
  PYTHONPATH="$root/workers/python:$root/workers/python/tests/frameworks/jobs" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 \
    "$python" "$here/tap.py" "$name" "$how" "$python" "$here/$script" "$work/$name" >"$here/../$name.jsonl"
}

record lightning-fit "record/lightning_fit.py (Lightning, no progress bar: the Lightning bridge reports), tapped by record/tap.py" lightning_fit.py
record torch-tqdm-loop "record/torch_loop.py (a PyTorch loop with a tqdm bar per epoch: the tqdm bridge reports), tapped by record/tap.py" torch_loop.py
