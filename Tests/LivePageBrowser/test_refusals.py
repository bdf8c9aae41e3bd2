"""The page's doors, tried with http.client (a browser cannot forge Host): without the token,
with a wrong one, under another Host, or from another Origin, every path is refused (401 or
403) and nothing is done to the task; a GET to an action's path is refused too (405)."""

import http.client
import json
import time

from conftest import task_command, wait_for

TASK = "train"
READS = [("GET", "/"), ("GET", "/api/status"), ("GET", "/api/events"), ("GET", "/api/tasks/%s/log?tail=5" % TASK)]
CHANGES = [("POST", "/api/tasks/%s/extend" % TASK, {"seconds": 3600}),
           ("POST", "/api/tasks/%s/revoke" % TASK, {"seconds": 0}),
           ("POST", "/api/tasks/%s/cancel" % TASK, {})]


def ask(supervisor, method, path, headers, body=None):
    """One request to the page's server; its status and body."""
    connection = http.client.HTTPConnection(supervisor.host, supervisor.port, timeout=20)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        # An event stream that was let in would never end: a few bytes say enough.
        return response.status, response.read(200 if response.status == 200 else 4096).decode(errors="replace")
    finally:
        connection.close()


def every_request():
    return [(m, p, None) for m, p in READS] + CHANGES


def test_requests_without_the_token_or_from_elsewhere_are_refused_and_change_nothing(start_batch):
    supervisor = start_batch({TASK: task_command("--steps", 1000, "--interval", 0.15)})
    wait_for("train running", lambda: supervisor.status()[TASK]["state"] == "running")
    bearer = {"Authorization": "Bearer " + supervisor.token}
    cookie = {"Cookie": "overtime_ui_{}=".format(supervisor.port) + supervisor.token}
    wrong = "0" * len(supervisor.token) if supervisor.token != "0" * len(supervisor.token) else "1" * len(supervisor.token)

    # The door works for the right key, so what follows is refused for its own reason.
    status, body = ask(supervisor, "GET", "/api/status", bearer)
    assert status == 200 and '"ok":true' in body.replace(" ", ""), (status, body)

    refused = []
    def expect(status_wanted, method, path, body, headers, why):
        status, text = ask(supervisor, method, path, headers, body)
        if status != status_wanted:
            refused.append("%s %s %s: %d, wanted %d: %s" % (why, method, path, status, status_wanted, text[:200]))

    for method, path, body in every_request():
        expect(401, method, path, body, {}, "no token")
        expect(401, method, path, body, {"Authorization": "Bearer " + wrong}, "a wrong bearer token")
        expect(401, method, path, body, {"Cookie": "overtime_ui_{}=".format(supervisor.port) + wrong}, "a wrong cookie")
        for host in ("evil.example:%d" % supervisor.port, "127.0.0.1.nip.io:%d" % supervisor.port, "127.0.0.1:%d" % (supervisor.port + 1)):
            expect(403, method, path, body, dict(bearer, Host=host), "the token under Host %s" % host)
            expect(403, method, path, body, dict(cookie, Host=host), "the cookie under Host %s" % host)
    expect(401, "GET", "/?token=" + wrong, None, {}, "a wrong ?token=")
    for method, path, body in CHANGES:
        for origin in ("http://evil.example", "http://127.0.0.1:%d" % (supervisor.port + 1), "null"):
            expect(403, method, path, body, dict(bearer, Origin=origin), "the token from Origin %s" % origin)
            expect(403, method, path, body, dict(cookie, Origin=origin), "the cookie from Origin %s" % origin)
        # An action's path read with GET (a link, an <img>) does nothing, with the right key.
        expect(405, "GET", path, None, bearer, "GET on an action")
        expect(405, "GET", path, None, cookie, "GET on an action")
    assert refused == [], "\n".join(refused)

    # Nothing reached the task: no operator action, no cancel, the deadline where progress
    # keeps it (the window, 30 s), the task still running.
    time.sleep(1)
    task = supervisor.status()[TASK]
    assert task["state"] == "running", task
    assert task["remaining"] <= 31, "the deadline moved: %r" % task
    journal = [e for e in supervisor.events(TASK) if e["event"] in ("operator", "cancel", "exited", "finished")]
    assert journal == [], journal
    assert [e.get("cause") for e in supervisor.events(TASK, "budget")] == ["start"], supervisor.events(TASK, "budget")
