"""The live page (`--ui`) in a real Chromium, driven by Selenium through Debian's chromedriver.

Fixtures: the built `overtime` (OVERTIME_BIN), a supervisor started with `--ui 0` (a batch
of Python tasks reporting through workers/python, or one `overtime run`) with its URL, run
directory, journal and `ctl status`; a headless Chromium; and a place for screenshots
($LIVE_PAGE_SHOTS, else the pytest temporary directory), whose paths are printed at the end
of the run. Every process a test starts is ended by its pid when the test ends, pass or fail.

Run by scripts/test (its `browser` step); alone:
OVERTIME_BIN=.build/debug/overtime .venv/bin/python -m pytest Tests/LivePageBrowser -q -p no:cacheprovider
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

REPO = Path(__file__).resolve().parents[2]
WORKER_LIBRARY = REPO / "workers" / "python"
TASK = Path(__file__).resolve().parent / "reporting_task.py"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")

# Upper bounds only: the suite shares two cores with builds and other suites.
START_WAIT = 30.0
CHANGE_WAIT = 30.0


def wait_for(what, probe, timeout=CHANGE_WAIT, interval=0.2):
    """Calls ``probe`` until it returns something true, and returns that; fails naming ``what``
    (and the last thing probe said, when it raised) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = probe()
            if value:
                return value
        except Exception as error:  # a stale element, a reply not yet there: try again
            last_error = error
        if time.monotonic() > deadline:
            raise AssertionError("not within %.0f s: %s%s" % (timeout, what, "" if last_error is None else " (last: %r)" % last_error))
        time.sleep(interval)


def end_process(process, grace=15.0):
    """Ends a process this suite started, by its pid: SIGTERM (a supervisor then cancels its
    tasks with reason shutdown), SIGKILL if it is still there after ``grace``."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)


def clean_env(**extra):
    """This environment without an Overtime the suite itself may run under, with the worker
    library on the tasks' path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OVERTIME_", "_OVERTIME_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(WORKER_LIBRARY), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def task_command(*args):
    """The reporting task (reporting_task.py) run by this interpreter."""
    return [sys.executable, str(TASK)] + [str(a) for a in args]


class Supervisor(object):
    """A running `overtime batch` or `overtime run` with `--ui 0`: its page's address and
    token, its run directory (a batch), and what `ctl` says of it."""

    def __init__(self, binary, process, workdir, run_dir):
        self.binary = binary
        self.process = process
        self.workdir = workdir
        self.run_dir = run_dir
        self.stderr_path = workdir / "supervisor.err"
        self.url = wait_for("the live page's URL said on stderr", self._said_url, timeout=START_WAIT)
        parts = urlsplit(self.url)
        self.host = parts.hostname
        self.port = parts.port
        self.base = "http://" + parts.netloc
        self.token = parts.query.split("token=", 1)[1]
        said_run = re.search(r"overtime: run (\S+?):", self.stderr())
        self.run_id = said_run.group(1) if said_run else None

    def stderr(self):
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def _said_url(self):
        if self.process.poll() is not None:
            raise AssertionError("the supervisor exited (status %s) before its page was up:\n%s" % (self.process.returncode, self.stderr()))
        match = re.search(r"overtime: live page: (http://\S+)", self.stderr())
        return match and match.group(1)

    def journal(self):
        """The batch's journal, RUN_DIR/events.jsonl, as objects (a line being written is left out)."""
        path = self.run_dir / "events.jsonl"
        lines = path.read_text().split("\n")[:-1] if path.exists() else []
        return [json.loads(line) for line in lines if line.strip()]

    def events(self, task, event=None):
        return [e for e in self.journal() if e.get("task") == task and (event is None or e.get("event") == event)]

    def status(self):
        """`overtime ctl --socket RUN status --json`: the socket found by the run id, as ctl finds it."""
        done = subprocess.run([str(self.binary), "ctl", "--socket", self.run_id, "status", "--json"], env=clean_env(),
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, "ctl status failed (%d): %s" % (done.returncode, done.stderr)
        return {t["name"]: t for t in json.loads(done.stdout)["tasks"]}


@pytest.fixture(scope="session")
def overtime_bin():
    path = os.environ.get("OVERTIME_BIN") or str(REPO / ".build" / "debug" / "overtime")
    if not os.access(path, os.X_OK):
        pytest.fail("no overtime binary at %s: build it (swift build) or set OVERTIME_BIN" % path)
    return Path(path).resolve()  # the supervisors start in directories of their own


@pytest.fixture
def start_batch(overtime_bin, tmp_path):
    """start_batch(tasks, **defaults): `overtime batch JOB --ui 0` over ``tasks`` (name to
    command), each with a 1 s grace so that ending the batch is quick."""
    started = []

    def start(tasks, **defaults):
        workdir = tmp_path / ("batch%d" % len(started))
        workdir.mkdir()
        job = {"defaults": dict({"grace": "1s"}, **defaults), "tasks": [{"name": n, "command": c} for n, c in tasks.items()]}
        (workdir / "job.json").write_text(json.dumps(job))
        run_dir = workdir / "run"
        with open(workdir / "supervisor.out", "wb") as out, open(workdir / "supervisor.err", "wb") as err:
            process = subprocess.Popen([str(overtime_bin), "batch", str(workdir / "job.json"), "--ui", "0", "--run-dir", str(run_dir)],
                                       cwd=str(workdir), env=clean_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        started.append(process)
        supervisor = Supervisor(overtime_bin, process, workdir, run_dir)
        written = wait_for("RUN_DIR/ui-url", lambda: (run_dir / "ui-url").exists() and (run_dir / "ui-url").read_text().strip(), timeout=START_WAIT)
        assert written == supervisor.url, "ui-url says %r, stderr said %r" % (written, supervisor.url)
        return supervisor

    yield start
    for process in started:
        end_process(process)


@pytest.fixture
def start_run(overtime_bin, tmp_path):
    """start_run(name, command): `overtime run --ui 0 --name NAME -- COMMAND` (no run directory)."""
    started = []

    def start(name, command):
        workdir = tmp_path / ("run%d" % len(started))
        workdir.mkdir()
        with open(workdir / "supervisor.out", "wb") as out, open(workdir / "supervisor.err", "wb") as err:
            process = subprocess.Popen([str(overtime_bin), "run", "--ui", "0", "--grace", "1s", "--progress", "none", "--name", name, "--"] + command,
                                       cwd=str(workdir), env=clean_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        started.append(process)
        return Supervisor(overtime_bin, process, workdir, None)

    yield start
    for process in started:
        end_process(process)


@pytest.fixture
def browser():
    """A headless Chromium with its console kept (``goog:loggingPrefs``) and every CSP
    violation recorded in ``window.__cspViolations`` by a script the browser runs before
    the page's own (a DevTools script, outside the page's policy)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1500,1000", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # A dialog is left for the test to see and answer (a Cancel's confirm), never dismissed unseen.
    options.set_capability("unhandledPromptBehavior", "ignore")
    service = Service(CHROMEDRIVER)
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_page_load_timeout(START_WAIT)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source":
            "window.__cspViolations = []; document.addEventListener('securitypolicyviolation', function (e) {"
            " window.__cspViolations.push(e.violatedDirective + ' blocked ' + e.blockedURI); });"})
        yield driver
    finally:
        try:
            driver.quit()
        finally:
            if service.process is not None and service.process.poll() is None:
                os.kill(service.process.pid, signal.SIGKILL)
                service.process.wait(10)


SHOTS = []


@pytest.fixture(scope="session")
def shots_dir(tmp_path_factory):
    given = os.environ.get("LIVE_PAGE_SHOTS")
    path = Path(given) if given else tmp_path_factory.mktemp("live-page-shots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def screenshot(browser, shots_dir, request):
    """screenshot(label): the page as it is now, saved as TEST-N-LABEL.png; its path is
    printed (and listed at the end of the run)."""
    taken = []

    def take(label):
        path = shots_dir / ("%s-%d-%s.png" % (request.node.name, len(taken) + 1, label))
        assert browser.save_screenshot(str(path)), "no screenshot saved to %s" % path
        taken.append(path)
        SHOTS.append(path)
        print("screenshot: %s" % path)
        return path
    return take


def pytest_terminal_summary(terminalreporter):
    if SHOTS:
        terminalreporter.write_sep("-", "live page screenshots")
        for path in SHOTS:
            terminalreporter.write_line(str(path))


# What the page shows, found as a user finds it: a task's row by the name in its first cell.
def row_of(driver, name):
    """The table's row showing the task ``name`` (None when no row shows it)."""
    for row in driver.find_elements(By.CSS_SELECTOR, "#table-rows > .row"):
        cell = row.find_element(By.CSS_SELECTOR, ".name")
        if cell.get_attribute("textContent").strip() == name and row.is_displayed():
            return row
    return None


def open_page(driver, supervisor, names):
    """Opens the URL the supervisor said (its token then leaves the address bar) and waits
    until a row shows each of ``names``."""
    driver.get(supervisor.url)
    wait_for("the token exchanged for the cookie and the page at /", lambda: driver.current_url == supervisor.base + "/", timeout=START_WAIT)
    for name in names:
        wait_for("a row for %r" % name, lambda: row_of(driver, name), timeout=START_WAIT)


def page_problems(driver):
    """What the page's console and its own error box hold: console entries at error level,
    CSP violations, and errors the page recorded (#errors, body[data-errors])."""
    problems = []
    for entry in driver.get_log("browser"):
        if entry["level"] == "SEVERE" or "Content Security Policy" in entry["message"] or "Content-Security-Policy" in entry["message"]:
            problems.append("console %s: %s" % (entry["level"], entry["message"]))
    problems += ["CSP violation: %s" % v for v in driver.execute_script("return window.__cspViolations || []")]
    recorded = driver.execute_script("return [document.body.dataset.errors || null, document.getElementById('errors').hidden, document.getElementById('errors').textContent]")
    if recorded[0] is not None or not recorded[1]:
        problems.append("the page's error box (data-errors=%s): %s" % (recorded[0], recorded[2]))
    return problems
