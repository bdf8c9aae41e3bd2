"""The live page as a user meets it in Chromium: a batch's tasks listed with progress that
moves, a row's Cancel ending its task for reason `user`, a row's Extend moving its deadline,
and a console with no error and no Content-Security-Policy violation."""

import re

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from conftest import CHANGE_WAIT, open_page, page_problems, row_of, task_command, wait_for

NAMES = ["prepare", "train", "evaluate"]


def percent_shown(driver, name):
    """The percentage a task's row shows in its progress bar's label (None before any)."""
    label = row_of(driver, name).find_element(By.CSS_SELECTOR, ".bar-label").get_attribute("textContent")
    match = re.search(r"(\d+)%$", label)
    return int(match.group(1)) if match else None


def budget_left_shown(driver, name):
    """What a task's row shows under "Budget left" (the second of its numeric cells)."""
    return row_of(driver, name).find_elements(By.CSS_SELECTOR, ".num")[1].get_attribute("textContent")


def last_log_line(driver):
    """The number the last line of the card's log tail ends in (the task's step), or None."""
    lines = driver.find_element(By.ID, "detail-log").get_attribute("textContent").strip().split("\n")
    match = re.search(r"(\d+)$", lines[-1])
    return int(match.group(1)) if match else None


def press(driver, name, action):
    """Clicks the ``action`` button (extend, revoke, cancel) of the row showing ``name``."""
    row = wait_for("a row for %r" % name, lambda: row_of(driver, name))
    row.find_element(By.CSS_SELECTOR, "button[data-action=%s]" % action).click()


def test_rows_move_and_their_cancel_and_extend_buttons_act(start_batch, browser, screenshot):
    # 1000 steps at 0.15 s: a percent about every 1.5 s, for 150 s; the window is 30 s.
    supervisor = start_batch({name: task_command("--steps", 1000, "--interval", 0.15, "--title", name + " epoch 1") for name in NAMES})
    open_page(browser, supervisor, NAMES)

    for name in NAMES:
        wait_for("a percentage in %s's row" % name, lambda: percent_shown(browser, name) is not None, timeout=CHANGE_WAIT)
    first = {name: percent_shown(browser, name) for name in NAMES}
    screenshot("listed")
    for name in NAMES:
        wait_for("%s's percentage moving past the %d%% of the first look" % (name, first[name]),
                 lambda: percent_shown(browser, name) > first[name])
    screenshot("moved")

    # Extend from the row: the input above the table says by how much.
    before = supervisor.status()["train"]["remaining"]
    assert before < 60, "train's deadline is already far (%.0f s left) before Extend: the test would prove nothing" % before
    extend_by = browser.find_element(By.ID, "extend-by")
    extend_by.clear()
    extend_by.send_keys("20m")
    press(browser, "train", "extend")
    extended = wait_for("ctl status showing train's deadline moved by the Extend of 20m",
                        lambda: supervisor.status()["train"]["remaining"] > 20 * 60 - 60 and supervisor.status()["train"])
    assert extended["state"] == "running", extended
    wait_for("train's row showing about 20 minutes left", lambda: re.match(r"^(19|20)m \d\ds$", budget_left_shown(browser, "train")))
    # What it did, said when its event came back (which may be before the POST's answer).
    wait_for("train's row saying it was extended", lambda: "extended" in row_of(browser, "train").find_element(By.CSS_SELECTOR, ".note").text)
    screenshot("extended")

    # Cancel from the row, its confirm accepted: reason `user` in the journal.
    press(browser, "prepare", "cancel")
    dialog = WebDriverWait(browser, CHANGE_WAIT).until(expected_conditions.alert_is_present())
    assert "prepare" in dialog.text, dialog.text
    dialog.accept()
    cancel = wait_for("a cancel of prepare with reason user in the journal", lambda: supervisor.events("prepare", "cancel"))
    assert [e["reason"] for e in cancel] == ["user"], cancel
    exited = wait_for("prepare's exited line in the journal", lambda: supervisor.events("prepare", "exited"))
    assert exited[0]["cancel_reason"] == "user" and exited[0]["outcome"] == "cancelled", exited
    wait_for("prepare's row showing it cancelled for user",
             lambda: "cancelled" in row_of(browser, "prepare").text and "user" in row_of(browser, "prepare").text)
    screenshot("cancelled")

    # Only the task whose button was pressed was touched.
    status = supervisor.status()
    assert status["evaluate"]["state"] == "running" and status["train"]["state"] == "running", status
    assert supervisor.events("train", "cancel") == [] and supervisor.events("evaluate", "cancel") == []
    assert status["evaluate"]["remaining"] < 60, "evaluate was extended too: %r" % status["evaluate"]


def test_console_has_no_error_and_no_policy_violation(start_batch, browser, screenshot):
    supervisor = start_batch({name: task_command("--steps", 1000, "--interval", 0.15) for name in NAMES})
    open_page(browser, supervisor, NAMES)
    # Everything the page does on its own: the table, a task's card with its chart and log
    # (read every 2 s), an action and the note its event brings back.
    row_of(browser, "train").find_element(By.CSS_SELECTOR, ".name").click()
    first_read = wait_for("train's card with its log", lambda: browser.find_element(By.ID, "detail-card").is_displayed() and last_log_line(browser))
    browser.find_element(By.ID, "detail-extend").click()
    wait_for("the extend in the journal", lambda: supervisor.events("train", "operator"))
    wait_for("the log read again, further on", lambda: last_log_line(browser) > first_read)
    screenshot("card")
    problems = page_problems(browser)
    assert problems == [], "\n".join(problems)
