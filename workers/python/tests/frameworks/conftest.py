"""Runs the real frameworks' jobs under the real `overtime run` (OVERTIME_BIN), in the
frameworks' venv (scripts/frameworks-venv: torch, Lightning, transformers, Keras, joblib),
with this checkout's workers/python first on the jobs' PYTHONPATH: its sitecustomize.py
installs the bridges at start-up, as for a job that uses the library from a directory
(the way the bundled copy reaches a job, too)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

JOBS = Path(__file__).resolve().parent / "jobs"
WORKER_LIBRARY = Path(__file__).resolve().parents[2]   # workers/python
PYTHON = sys.executable


def job_env(until, **extra):
    """The environment of a job: the test's, minus anything of an Overtime the suite runs
    under, with this checkout's worker library as its PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OVERTIME_", "_OVERTIME_")) and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(WORKER_LIBRARY), PYTHONUNBUFFERED="1", JOB_UNTIL="{:.3f}".format(until), KERAS_BACKEND="torch",
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    env.update(extra)
    return env


class Job(object):
    """One finished `overtime run`: its exit status, output, events and final report."""

    def __init__(self, completed, events_path, report_path, started):
        self.code = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.seconds = time.monotonic() - started
        with open(events_path) as events:
            self.events = [json.loads(line) for line in events if line.strip()]
        try:
            with open(report_path) as report:
                self.report = json.load(report)
        except (OSError, ValueError):
            self.report = None

    def progress(self, bar_prefix):
        """The progress events of bars whose id starts with `bar_prefix`."""
        return [e for e in self.events if e["event"] == "progress" and str(e.get("bar", "")).startswith(bar_prefix)]

    @property
    def cancel_reason(self):
        return self.report and self.report.get("cancel_reason")

    def __repr__(self):
        tail = "\n".join(self.stderr.splitlines()[-25:])
        return "exit {} after {:.1f} s; report {}\n--- stderr (last lines)\n{}".format(
            self.code, self.seconds, json.dumps(self.report), tail)


class Overtime(object):
    def __init__(self, binary):
        self.binary = binary

    def run(self, options, command, env, tmp_path, timeout=120):
        events, report = tmp_path / "events.jsonl", tmp_path / "report.json"
        argv = [self.binary, "run", "--report", str(report), "--progress", "plain", "--events", str(events)] + list(options)
        argv += ["--"] + [str(c) for c in command]
        started = time.monotonic()
        completed = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                   timeout=timeout, env=env, cwd=str(tmp_path))
        return Job(completed, events, report, started)


@pytest.fixture(scope="session")
def overtime():
    binary = os.environ.get("OVERTIME_BIN")
    if not binary or not os.access(binary, os.X_OK):
        pytest.fail("OVERTIME_BIN={!r} is not an executable file: scripts/test sets it to the built overtime".format(binary))
    return Overtime(binary)
