# The live page open in headless Chromium, for the `ui` row: `livepage.py URL READY SECONDS`
# opens URL (the run's page with its token) through chromedriver, waits until the page says
# it is live and shows rows, then touches READY and measures for SECONDS:
#   frames      requestAnimationFrame callbacks of a loop run in the page (what the page could
#               draw: headless Chromium draws at most 60 a second)
#   script_s    the page's own script time and task time (CDP Performance.getMetrics
#   task_s      ScriptDuration and TaskDuration), over the same seconds
#   messages    event-stream messages the page received, and their bytes (EventSource wrapped
#   bytes       before the page's script runs)
#   tasks       the tasks the page knows of at the end
#   longest_ms  its longest task (PerformanceObserver "longtask", 50 ms and over)
# It prints them as key=value on one line, then keeps the page open until SIGTERM, so that
# the supervisor serves it for the whole of the bench's window. Exits 1 when the page never
# went live.
import os, signal, sys, time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

url, ready, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])

# Counts what the stream delivers: a wrapper whose instances count every message event.
COUNTER = """
window.__bench = { messages: 0, bytes: 0, longest: 0 };
const Original = window.EventSource;
window.EventSource = function (url, options) {
  const source = new Original(url, options);
  source.addEventListener("message", function (m) { window.__bench.messages++; window.__bench.bytes += m.data.length + 8; });
  return source;
};
window.EventSource.prototype = Original.prototype;
try {
  new PerformanceObserver(function (list) {
    list.getEntries().forEach(function (e) { window.__bench.longest = Math.max(window.__bench.longest, e.duration); });
  }).observe({ type: "longtask", buffered: true });
} catch (e) {}
"""

# requestAnimationFrame callbacks over the given milliseconds.
FRAMES = """
const done = arguments[arguments.length - 1], ms = arguments[0];
let frames = 0; const start = performance.now();
function step(now) { if (now - start < ms) { frames++; requestAnimationFrame(step); } else done(frames); }
requestAnimationFrame(step);
"""

stop = False
def on_term(signum, frame):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)

options = webdriver.ChromeOptions()
for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
    options.add_argument(argument)
chromium = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
if os.path.exists(chromium):
    options.binary_location = chromium
driver = webdriver.Chrome(service=Service(os.environ.get("BENCH_CHROMEDRIVER", "/usr/bin/chromedriver")), options=options)
try:
    driver.set_script_timeout(seconds + 30)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COUNTER})
    driver.execute_cdp_cmd("Performance.enable", {})
    driver.get(url)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = driver.execute_script("return [document.getElementById('run-status').textContent, document.querySelectorAll('#table-rows .row').length, window.__bench.messages]")
        if status[0] == "live" and status[1] > 0 and status[2] > 0:
            break
        time.sleep(0.2)
    else:
        print(f"livepage: the page did not go live in 30 s: {status}", file=sys.stderr)
        sys.exit(1)
    open(ready, "w").close()

    def metrics():
        return {m["name"]: m["value"] for m in driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
    before, counted = metrics(), driver.execute_script("return Object.assign({}, window.__bench)")
    frames = driver.execute_async_script(FRAMES, seconds * 1000)
    after, now = metrics(), driver.execute_script("return Object.assign({}, window.__bench, {status: document.getElementById('run-status').textContent, shown: document.getElementById('shown').textContent})")
    print(f"frames={frames} seconds={seconds:g} fps={frames / seconds:.1f}"
          f" script_s={after['ScriptDuration'] - before['ScriptDuration']:.3f}"
          f" task_s={after['TaskDuration'] - before['TaskDuration']:.3f}"
          f" messages={now['messages'] - counted['messages']} bytes={now['bytes'] - counted['bytes']}"
          f" longest_ms={now['longest']:.0f} status={now['status']} tasks={now['shown'].split()[2] if len(now['shown'].split()) > 2 else 0}", flush=True)
    while not stop:
        time.sleep(0.2)
finally:
    driver.quit()
