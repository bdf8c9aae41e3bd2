"""Task text in the real page stays text: markup (`</script>`, `<img onerror>`) in a task's
name, title, detail, result and log lines is shown literally and never becomes an element,
and a bidi control (U+202E) is shown as its code point, not obeyed.

A batch's task names cannot carry markup (the job file refuses them), so the name is tried
through `overtime run --name`, which takes any name without control characters."""

from pathlib import Path

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from conftest import open_page, row_of, task_command, wait_for

# Each would set body[data-pwned] (and the img would raise an alert) if the page made it markup.
MARKUP = ('</script><script>document.body.dataset.pwned="script"</script>'
          '<img src=x onerror="document.body.dataset.pwned=\'img\';alert(1)">')
RLO = "\u202e"
RLO_SHOWN = "⟨U+202E⟩"


def evil(field):
    return "%s %s exe.%stxt" % (field, MARKUP, RLO)


def shown(field):
    return "%s %s exe.%stxt" % (field, MARKUP, RLO_SHOWN)


def text_of(driver, element_id):
    return driver.find_element(By.ID, element_id).get_attribute("textContent")


def assert_nothing_ran(driver):
    """No element the task's text could have made, no script of it run, no dialog, and no
    bidi control left in what the page shows."""
    try:
        alert = driver.switch_to.alert
        raise AssertionError("a dialog opened: %r" % alert.text)
    except NoAlertPresentException:
        pass
    found = driver.execute_script("return {img: document.querySelectorAll('img').length, scripts: document.querySelectorAll('script').length,"
                                  " pwned: document.body.dataset.pwned || null, rlo: document.body.innerText.indexOf('\\u202e')}")
    assert found == {"img": 0, "scripts": 1, "pwned": None, "rlo": -1}, found


def test_title_detail_result_and_log_lines_are_shown_as_text(start_batch, browser, screenshot, tmp_path):
    finish = tmp_path / "finish"
    supervisor = start_batch({"evil": task_command("--steps", 1000, "--interval", 0.2, "--title", evil("title"), "--detail", evil("detail"),
                                                   "--log", evil("log"), "--result", evil("result"), "--finish-when", finish)})
    open_page(browser, supervisor, ["evil"])
    label = wait_for("the title and detail in evil's row",
                     lambda: "detail" in row_of(browser, "evil").find_element(By.CSS_SELECTOR, ".bar-label").get_attribute("textContent")
                     and row_of(browser, "evil").find_element(By.CSS_SELECTOR, ".bar-label").get_attribute("textContent"))
    assert_nothing_ran(browser)
    assert label.startswith(shown("title") + " · " + shown("detail") + " · "), label

    row_of(browser, "evil").find_element(By.CSS_SELECTOR, ".name").click()
    log = wait_for("evil's log lines in its card", lambda: shown("log") in text_of(browser, "detail-log") and text_of(browser, "detail-log"))
    assert (shown("log") + " 0\n") in log, log[:500]
    screenshot("running")

    Path(finish).write_text("")
    exited = wait_for("evil's exited event in its card", lambda: [li.get_attribute("textContent") for li in browser.find_elements(By.CSS_SELECTOR, "#detail-events li")
                                                                  if " exited " in li.get_attribute("textContent")])
    # The event's fields as JSON: the result's quotes are escaped there, its markup is not touched.
    assert shown("result").replace('"', '\\"') in exited[0], exited[0]
    assert supervisor.events("evil", "exited")[0]["result"] == {"note": evil("result")}
    screenshot("exited")
    assert_nothing_ran(browser)


def test_a_task_name_is_shown_as_text(start_run, browser, screenshot):
    supervisor = start_run(evil("name"), task_command("--steps", 1000, "--interval", 0.2, "--title", evil("title")))
    open_page(browser, supervisor, [])
    wait_for("the name's row", lambda: "name" in browser.find_element(By.ID, "table-rows").get_attribute("textContent"))
    assert_nothing_ran(browser)
    row_of(browser, shown("name")).find_element(By.CSS_SELECTOR, ".name").click()
    wait_for("the name in the task's card", lambda: text_of(browser, "detail-name") == shown("name"))
    wait_for("the title in the task's card", lambda: shown("title") in text_of(browser, "detail-facts"))
    screenshot("card")
    assert_nothing_ran(browser)
