"""docs/jobfile.schema.json holds for the job files people write, checked by a real validator.

- The schema is itself valid under the JSON Schema 2020-12 metaschema.
- Every whole job file on docs/jobfile.md (its ```yaml and ```json blocks that hold
  `tasks`), deploy/job.json, workers/demo.json, and files written in the forms the decoder
  takes (every way of writing a duration, a signal, a limit, a sweep) are accepted: the
  schema must not refuse what `overtime batch` runs.
- Each YAML example on that page says the same as the JSON form shown below it.
- The common mistakes are refused, each for its own reason, with the field named.

check-jsonschema (pinned by scripts/setup) reads YAML with ruamel.yaml, as YAML 1.2, which
is how Overtime reads it: `yes` is a string there, not true.

Run by scripts/test; alone: .venv/bin/python -m pytest Tests/JobFileSchema/test_jobfile_schema.py -q -p no:cacheprovider
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML  # check-jsonschema's own YAML reader (YAML 1.2)

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "docs" / "jobfile.schema.json"
DOC = REPO / "docs" / "jobfile.md"
# Beside the interpreter running the tests: the .venv scripts/setup made.
VALIDATOR = Path(sys.executable).parent / "check-jsonschema"


def validate(paths, *options):
    """check-jsonschema's verdict on `paths` (one run for all of them), as its JSON report."""
    run = subprocess.run([str(VALIDATOR), "--schemafile", str(SCHEMA), "--output-format", "json", *options,
                          *map(str, paths)], capture_output=True, text=True, timeout=120)
    try:
        return json.loads(run.stdout)
    except ValueError:
        pytest.fail(f"check-jsonschema exited {run.returncode} without a report:\n{run.stdout}\n{run.stderr}")


def load_yaml(text):
    return YAML(typ="safe", pure=True).load(text)


def doc_blocks():
    """Each fenced block of docs/jobfile.md as (language, text, line)."""
    blocks, language, lines, start = [], None, [], 0
    for number, line in enumerate(DOC.read_text().splitlines(), 1):
        if language is None and re.fullmatch(r"```(json|yaml)", line):
            language, lines, start = line[3:], [], number
        elif language is not None and line == "```":
            blocks.append((language, "\n".join(lines) + "\n", start))
            language = None
        elif language is not None:
            lines.append(line)
    return blocks


def job_examples():
    """The page's blocks that are whole job files (they hold `tasks`), parsed."""
    examples = []
    for language, text, line in doc_blocks():
        value = json.loads(text) if language == "json" else load_yaml(text)
        if isinstance(value, dict) and "tasks" in value:
            examples.append((language, text, line, value))
    return examples


def test_the_schema_is_valid_under_its_metaschema():
    run = subprocess.run([str(VALIDATOR), "--check-metaschema", str(SCHEMA)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_example_job_file_is_accepted(tmp_path):
    examples = job_examples()
    assert sum(1 for e in examples if e[0] == "yaml") >= 6 and sum(1 for e in examples if e[0] == "json") >= 6
    files = []
    for language, text, line, _ in examples:
        path = tmp_path / f"jobfile.md-line-{line}.{language}"
        path.write_text(text)
        files.append(path)
    for name, text in ACCEPTED.items():
        path = tmp_path / name
        path.write_text(text)
        files.append(path)
    report = validate(files + [REPO / "deploy" / "job.json", REPO / "workers" / "demo.json"])
    assert report["status"] == "ok", json.dumps(report["errors"], indent=2)


def test_each_yaml_example_says_what_its_json_form_says():
    examples = job_examples()
    pairs = 0
    for (language, _, line, value), following in zip(examples, examples[1:] + [None]):
        if language != "yaml":
            continue
        assert following is not None and following[0] == "json", f"the YAML example at line {line} has no JSON form after it"
        assert value == following[3], f"the YAML example at line {line} and the JSON at line {following[2]} differ"
        pairs += 1
    assert pairs >= 6


# Files in the forms `overtime batch` takes that a schema could easily refuse by mistake.
ACCEPTED = {
    "durations.json": json.dumps({
        "deadline": "NONE", "warn-signal": "usr1", "warn-lead": 90, "executor": "SRUN", "concurrency": 4.0,
        "metrics": "[::1]:9464", "metrics-file": "metrics/batch.prom",
        "resources": {"gpu": [0, 1, "2"], "mem-gb": 64},
        "defaults": {"budget": 0, "window": "none", "grace": 0, "min-start": "0.5s", "retries": 0},
        "tasks": [
            {"name": "a", "command": ["true"], "budget": " 1h30m ", "max-runtime": "1d", "warn-before": "250ms",
             "window": 2.5, "diagnose": "py-spy dump --pid {pid}", "diagnose-limit": "3s",
             "retries": {"max": 3, "backoff": 10, "max-backoff": "5m", "on": ["exit:75", "EXIT: 3", "failed", "oom"]}},
            {"name": "_b.2", "command": ["true"], "after": ["a"],
             "user": 1000, "group": "nogroup", "nice": "-20", "notify-fd": 5, "notify-socket": False,
             "limits": {"as": "24G", "nofile": "512:1024", "cpu": "2h:unlimited", "nproc": 256},
             "memory-max": "1.5GiB", "memory-warn": "80%", "resources": {"gpu": 1, "mem-gb": 8}},
            {"name": "c", "command": ["true"], "after": [{"task": "a", "when": "ready"}], "memory-max": "none", "env": {"A": "1"},
             "clean-env": True, "python-bridge": False, "every-reporter": True, "require-advance": True, "cwd": "runs/c"},
            {"name": "d", "command": ["true"], "memory-max": "8G", "memory-warn": "7G"},
        ],
    }),
    "signals.yaml": "warn-signal: SIGRTMIN+3\ntasks: [{name: a, command: [\"true\"]}]\n",
    "signal-number.yaml": "warn-signal: \"10\"\ntasks: [{name: a, command: [\"true\"]}]\n",
    # The contract's own example (sweeps and arrays), with a duration from a key.
    "sweeps.yaml": """\
tasks:
  - name: train
    matrix:
      lr: [1e-2, 3e-3, 1e-3]
      seed: [1, 2]
      include:
        - {lr: 1e-4, seed: 1}
        - {lr: 1e-3, note: small}
      exclude:
        - {lr: 1e-2, seed: 2}
    command: [python3, sweep.py, --lr, "{lr}", --seed, "{seed}"]
    max-running: 2
  - name: long
    matrix: {hours: ["1h", "2h"], fast: [true, false]}
    command: [python3, long.py, "{index}"]
    max-runtime: "{hours}"
  - name: shard
    array: "0-999%50"
    command: [process, --shard, "{index}"]
  - name: steps
    array: "1, 3, 5-7, 10-100:10"
    max-running: 4
    command: [process, "{index}"]
  - name: listed
    array: [0, 7, 42]
    command: [process, "{index}"]
  - name: summary
    command: [python3, summarize.py]
    after: [{task: train, when: done}]
  - name: merge
    array: "0-999"
    command: [merge, "{index}"]
    after: [{task: shard, same-index: true}]
""",
    "schema-member.json": json.dumps({"$schema": "./jobfile.schema.json", "tasks": [{"name": "a", "command": ["true"]}]}),
}

# One mistake a file, the place the validator must name, and words its message must hold.
REFUSED = [
    ("unknown-field.json", {"tasks": [{"name": "train", "command": ["python3", "train.py"], "max_runtime": "1h"}]},
     "$.tasks[0]", "'max_runtime' was unexpected"),
    ("unknown-top-field.json", {"jobs": [], "tasks": [{"name": "a", "command": ["true"]}]}, "$", "'jobs' was unexpected"),
    ("string-command.json", {"tasks": [{"name": "evaluate", "command": "python3 eval.py"}]},
     "$.tasks[0].command", "'python3 eval.py' is not of type 'array'"),
    ("yes-for-true.yaml", "tasks:\n  - name: clean\n    command: [python3, clean.py]\n    require-advance: yes\n",
     "$.tasks[0]['require-advance']", "'yes' is not of type 'boolean'"),
    ("negative-duration.json", {"tasks": [{"name": "train", "command": ["true"], "budget": "-1s"}]},
     "$.tasks[0].budget", "'-1s' does not match"),
    ("negative-seconds.json", {"tasks": [{"name": "train", "command": ["true"], "grace": -1}]},
     "$.tasks[0].grace", "-1 is less than the minimum of 0"),
    ("wordy-duration.yaml", "tasks: [{name: a, command: [\"true\"], budget: 3 hours}]\n",
     "$.tasks[0].budget", "'3 hours' does not match"),
    ("key-in-min-start.yaml", "tasks: [{name: a, array: \"0-3\", command: [\"true\"], min-start: \"{index}\"}]\n",
     "$.tasks[0]['min-start']", "'{index}' does not match"),
    ("null-duration.yaml", "tasks: [{name: a, command: [\"true\"], budget: }]\n",
     "$.tasks[0].budget", "None is not of type"),
    ("matrix-and-array.yaml", "tasks:\n  - name: train\n    matrix: {lr: [\"1e-2\"]}\n    array: \"0-9\"\n"
                              "    command: [python3, sweep.py, --lr, \"{lr}\"]\n",
     "$.tasks[0]", "'required': ['matrix', 'array']"),
    ("defaults-command.json", {"defaults": {"command": ["true"]}, "tasks": [{"name": "a", "command": ["true"]}]},
     "$.defaults", "'command' was unexpected"),
    ("defaults-matrix.yaml", "defaults: {matrix: {lr: [1]}}\ntasks: [{name: a, command: [\"true\"]}]\n",
     "$.defaults", "'matrix' was unexpected"),
    ("defaults-max-running.yaml", "defaults: {max-running: 2}\ntasks: [{name: a, command: [\"true\"]}]\n",
     "$.defaults", "'max-running' was unexpected"),
    ("when-word.json", {"tasks": [{"name": "a", "command": ["true"]},
                                  {"name": "b", "command": ["true"], "after": [{"task": "a", "when": "finished"}]}]},
     "$.tasks[1].after[0]", "'finished' is not one of ['success', 'done', 'ready']"),
    ("dependency-field.yaml", "tasks:\n  - {name: a, array: \"0-3\", command: [\"true\"]}\n"
                              "  - {name: b, array: \"0-3\", command: [\"true\"], after: [{task: a, same_index: true}]}\n",
     "$.tasks[1].after[0]", "'same_index' was unexpected"),
    ("retry-word.json", {"tasks": [{"name": "a", "command": ["true"], "retries": {"max": 2, "on": ["crash"]}}]},
     "$.tasks[0].retries", "'crash' is not one of"),
    ("retry-exit-0.json", {"tasks": [{"name": "a", "command": ["true"], "retries": {"max": 2, "on": ["exit:0"]}}]},
     "$.tasks[0].retries", "'exit:0' does not match"),
    ("retry-field.json", {"tasks": [{"name": "a", "command": ["true"], "retries": {"max": 2, "delay": "5s"}}]},
     "$.tasks[0].retries", "'delay' was unexpected"),
    ("executor.json", {"executor": "slurm", "tasks": [{"name": "a", "command": ["true"]}]},
     "$.executor", "'slurm' is not one of ['local', 'srun']"),
    ("warn-signal.json", {"warn-signal": "TERM", "tasks": [{"name": "a", "command": ["true"]}]},
     "$['warn-signal']", "'TERM' does not match"),
    ("warn-lead-alone.json", {"warn-lead": "2m", "tasks": [{"name": "a", "command": ["true"]}]},
     "$", "'warn-signal' is a dependency of 'warn-lead'"),
    ("memory-number.json", {"tasks": [{"name": "a", "command": ["true"], "memory-max": 8}]},
     "$.tasks[0]['memory-max']", "8 is not of type 'string'"),
    ("array-syntax.yaml", "tasks: [{name: shard, array: \"0..999\", command: [p, \"{index}\"]}]\n",
     "$.tasks[0].array", "'0..999' does not match"),
    ("array-cap-twice.yaml", "tasks: [{name: shard, array: \"0-999%50\", max-running: 10, command: [p, \"{index}\"]}]\n",
     "$.tasks[0]", "'pattern': '%'"),
    ("max-running-alone.yaml", "tasks: [{name: a, max-running: 2, command: [\"true\"]}]\n",
     "$.tasks[0]", "'matrix' is a required property"),
    ("matrix-index-key.yaml", "tasks: [{name: a, matrix: {index: [1, 2]}, command: [p, \"{index}\"]}]\n",
     "$.tasks[0].matrix", "'index'"),
    ("matrix-value-twice.yaml", "tasks: [{name: a, matrix: {seed: [1, 2, 1]}, command: [p, \"{seed}\"]}]\n",
     "$.tasks[0].matrix.seed", "has non-unique elements"),
    ("matrix-empty-list.yaml", "tasks: [{name: a, matrix: {lr: []}, command: [p, \"{lr}\"]}]\n",
     "$.tasks[0].matrix.lr", "should be non-empty"),
    ("name-with-key.yaml", "tasks: [{name: \"train-{lr}\", matrix: {lr: [1]}, command: [p]}]\n",
     "$.tasks[0].name", "'train-{lr}' does not match"),
    ("no-tasks.json", {"tasks": []}, "$.tasks", "should be non-empty"),
    ("concurrency-0.json", {"concurrency": 0, "tasks": [{"name": "a", "command": ["true"]}]},
     "$.concurrency", "0 is less than the minimum of 1"),
]


@pytest.fixture(scope="module")
def refused_report(tmp_path_factory):
    """check-jsonschema run once over every file of REFUSED: its errors by file name."""
    directory = tmp_path_factory.mktemp("refused")
    for name, content, _, _ in REFUSED:
        (directory / name).write_text(content if isinstance(content, str) else json.dumps(content))
    # -vv: every error under a oneOf, not only the one check-jsonschema guesses is meant.
    report = validate([directory / name for name, _, _, _ in REFUSED], "-vv")
    errors = {}
    for error in report.get("errors", []):
        errors.setdefault(Path(error["filename"]).name, []).append(error)
    return errors


@pytest.mark.parametrize("name,content,path,words", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_common_mistake_is_refused_naming_it(refused_report, name, content, path, words):
    errors = refused_report.get(name)
    assert errors, f"{name} was accepted"
    # Refused for this mistake only: every error is about the place named.
    assert all(e["path"] == path for e in errors), json.dumps(errors, indent=2)
    messages = [m for e in errors for m in [e["message"]] + [sub["message"] for sub in e.get("sub_errors", [])]]
    assert any(words in m for m in messages), json.dumps(errors, indent=2)
