// The live page's own tests: its real script (live.js, in live.html's <script> element as
// the build puts it there), run by node (node:test, no packages) against the elements
// live.html declares, a fake fetch answering /api/status from a fixture, a fake EventSource
// the test sends events through, and frames the test runs by hand. What the page writes
// into its elements is what is checked, and how many writes it takes.
// The timeline's canvas is checked by what was drawn on it (rectangles and their colours,
// text); how it looks and a real browser's frame rate are Chromium's to test.
// Run: node --test Tests/LivePage/live.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

const pageDirectory = fileURLToPath(new URL("../../Sources/OvertimeReport/Page/", import.meta.url));
const html = readFileSync(pageDirectory + "live.html", "utf8");
const script = html.match(/<script(?: nonce="\{\{nonce\}\}")?>(\{\{[^<]*)<\/script>/)[1].replace(/\{\{([^}]+\.js)\}\}/g, (hole, name) =>
  readFileSync(pageDirectory + name, "utf8").replace(/\n$/, ""));
const declaredIDs = new Set([...html.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]));

// How many times the page called JSON.stringify since the counter was last reset.
let stringified = 0;
const countingJSON = { parse: JSON.parse, stringify: (...args) => { stringified++; return JSON.stringify(...args); } };

// What the canvases were given since the page was loaded (or `drawn` was reset).
let drawn = { rects: [], texts: [] };

// Every write of text or style the page made since the counter was last reset, by element.
let writes = new Map();
function countWrite(element) { writes.set(element, (writes.get(element) || 0) + 1); }

class FakeElement {
  constructor(tag, id = null) {
    this.tagName = tag.toUpperCase();
    this.id = id;
    this.children = [];
    this.parentNode = null;
    this.dataset = {};
    this.listeners = {};
    this.hidden = false;
    this.className = "";
    this.value = "";
    this.scrollTop = 0;
    this.clientHeight = 600;
    this.clientWidth = 800;
    this.width = 0;
    this.height = 0;
    this.ownText = "";
    const element = this;
    const style = {};
    this.style = new Proxy(style, { set(target, name, value) { countWrite(element); target[name] = value; return true; } });
    const classes = new Set();
    this.classes = classes;
    this.classList = {
      add: (...names) => names.forEach((n) => classes.add(n)),
      remove: (...names) => names.forEach((n) => classes.delete(n)),
      toggle: (name, on) => (on ? classes.add(name) : classes.delete(name)),
      contains: (name) => classes.has(name),
    };
  }
  // textContent replaces the children, as a browser's does; reading it joins theirs.
  set textContent(value) { countWrite(this); this.ownText = String(value); this.children = []; }
  get textContent() { return this.ownText + this.children.map((c) => c.textContent).join(""); }
  // The page must never write task data as markup.
  set innerHTML(value) { throw new Error("innerHTML written: " + value); }
  appendChild(child) { child.parentNode = this; this.children.push(child); return child; }
  get firstChild() { return this.children[0] || null; }
  removeChild(child) {
    const at = this.children.indexOf(child);
    if (at < 0) throw new Error("removeChild: not a child");
    countWrite(this); this.children.splice(at, 1); child.parentNode = null; return child;
  }
  addEventListener(type, handler) { (this.listeners[type] ||= []).push(handler); }
  dispatch(type, fields = {}) { for (const handler of this.listeners[type] || []) handler({ target: this, ...fields }); }
  // A 2D context that takes every call; the rectangles filled and the text written are kept
  // (drawn, below), text 6 px a character wide.
  getContext() {
    return new Proxy({}, {
      get(target, name) {
        if (name === "fillRect") return (...rect) => drawn.rects.push([target.fillStyle, ...rect]);
        if (name === "fillText") return (text, x, y) => drawn.texts.push([String(text), x, y]);
        if (name === "measureText") return (text) => ({ width: String(text).length * 6 });
        return name in target ? target[name] : () => ({});
      },
      set: (target, name, value) => { target[name] = value; return true; },
    });
  }
}

function response(status, body) {
  return { ok: status >= 200 && status < 300, status,
    json: async () => (typeof body === "string" ? JSON.parse(body) : body), text: async () => String(body) };
}

// The page loaded against `status` (the /api/status reply) and `routes` (path → reply).
// `stream`: what each EventSource does once made: "open" (then onopen), "fail" (onerror,
// never open, as a browser's does when the server is gone or refuses), or "hold" (nothing).
async function loadPage(status, { routes = {}, confirmAnswer = true, stream = "open" } = {}) {
  writes = new Map();
  drawn = { rects: [], texts: [] };
  const elements = new Map();
  const body = new FakeElement("body");
  const frames = [], timers = [], posts = [], gets = [], sources = [];
  let clock = 1000, wall = Date.UTC(2026, 11, 4, 12, 0, 0);
  const document = {
    body,
    getElementById(id) {
      if (!elements.has(id)) {
        if (!declaredIDs.has(id)) return null;
        elements.set(id, new FakeElement(id === "progress-chart" ? "canvas" : "div", id));
      }
      return elements.get(id);
    },
    createElement: (tag) => new FakeElement(tag),
    addEventListener() {},
  };
  document.getElementById("extend-by").value = "10m";
  document.getElementById("detail-extend-by").value = "10m";
  let statusReply = status;
  let streamBehaviour = stream;
  class EventSource {
    constructor(url) {
      this.url = url; this.closed = false; this.readyState = 0; sources.push(this);
      const behaviour = streamBehaviour;
      setImmediate(() => { if (behaviour === "open") this.open(); else if (behaviour === "fail") this.fail(); });
    }
    open() { if (!this.closed) { this.readyState = 1; this.onopen(); } }
    fail() { if (!this.closed) { this.readyState = 0; this.onerror(); } }
    close() { this.closed = true; this.readyState = 2; }
  }
  const fetch = async (url, options = {}) => {
    if (options.method === "POST") {
      posts.push({ url, body: JSON.parse(options.body) });
      return response(200, routes[url] || { ok: true, result: "done" });
    }
    gets.push(url);
    if (url === "/api/status") return typeof statusReply === "function" ? statusReply() : response(200, statusReply);
    if (url in routes) return typeof routes[url] === "function" ? routes[url]() : response(200, routes[url]);
    return response(404, "not found");
  };
  const window = { devicePixelRatio: 1, listeners: {}, addEventListener(type, h) { (this.listeners[type] ||= []).push(h); } };
  const context = {
    document, window, fetch, EventSource, JSON: countingJSON, Date: { now: () => wall, parse: Date.parse },
    requestAnimationFrame: (f) => frames.push(f),
    setInterval: (f, ms) => { timers.push({ f, ms, every: true }); return timers.length; },
    clearInterval: (id) => { if (timers[id - 1]) timers[id - 1].cleared = true; },
    setTimeout: (f, ms) => { timers.push({ f, ms }); return timers.length; },
    clearTimeout: (id) => { if (timers[id - 1]) timers[id - 1].cleared = true; },
    confirm: () => confirmAnswer,
    performance: { now: () => clock },
  };
  vm.runInNewContext(script, context, { filename: pageDirectory + "live.html <script>" });
  const page = {
    element: (id) => document.getElementById(id), body, frames, posts, gets, sources, timers, window, document,
    setStatus(reply) { statusReply = reply; },
    setStream(behaviour) { streamBehaviour = behaviour; },
    async settle() { for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r)); },
    runFrames() { let n = 0; while (frames.length) { frames.shift()(); n++; } return n; },
    advance(ms) { clock += ms; wall += ms; },
    // The one-second countdown's tick, as the browser would call it.
    tick() { timers.filter((t) => t.every && t.ms === 1000 && !t.cleared).forEach((t) => t.f()); },
    send(event) { sources[sources.length - 1].onmessage({ data: JSON.stringify({ time: new Date(wall).toISOString(), run: "r1", ...event }) }); },
    // The rows in view: each a list of its cells' text.
    rows() {
      return page.element("table-rows").children.filter((r) => !r.hidden).sort((a, b) => parseInt(a.style.top) - parseInt(b.style.top))
        .map((r) => r.children.map((c) => c.textContent));
    },
    rowOf(name) { return page.element("table-rows").children.find((r) => !r.hidden && r.children[0].textContent.trim().startsWith(name)); },
    cell(name, column) { return page.rowOf(name).children[COLUMNS.indexOf(column)]; },
    button(name, action) { return page.rowOf(name).children[9].children.find((b) => b.dataset.action === action); },
  };
  await page.settle();
  page.runFrames();
  return page;
}
const COLUMNS = ["name", "state", "progress", "rate", "remaining", "memory", "attempts", "phase", "reason", "actions"];

function statusFixture() {
  return { ok: true, run: "20261204-120000-abcd", tasks: [
    { name: "train", pid: 4242, state: "running", attempts: 1, elapsed: 73.2, remaining: 28.5,
      progress: { completed: 40, total: 100, fraction: 0.4, title: "Epoch 2/5", detail: "loss 0.31", bar: "tqdm-2" },
      memory: 1073741824, peak_memory: 1211105280, phase: "eval", window: 45 },
    { name: "prep", state: "succeeded", attempts: 1 },
    { name: "stuck", state: "cancelling", cancel_reason: "timeout", pid: 7, remaining: 0, attempts: 2 },
    { name: "sweep[lr=0.1]", sweep: "sweep", state: "running", pid: 8, remaining: 100, attempts: 1 },
    { name: "sweep[lr=0.2]", sweep: "sweep", state: "failed", attempts: 3, reason: "exit 1" },
    { name: "sweep", state: "waiting", reason: "1,002 elements: 1,000 not started", elements: { waiting: 1000 } },
  ] };
}

test("rows come from the status: state, bar, budget, memory, attempts, phase, reason", async () => {
  const page = await loadPage(statusFixture());
  assert.equal(page.body.dataset.errors, undefined);
  assert.deepEqual(page.rows().map((r) => r[0].trim()), ["train", "prep", "stuck", "▸ sweep (1002)"]);
  const train = page.rowOf("train").children;
  assert.equal(train[1].textContent, "running");
  assert.equal(train[2].textContent, "Epoch 2/5 · loss 0.31 · 40/100 · 40%");
  assert.equal(train[2].children[0].children[0].style.width, "40.0%");
  assert.equal(train[4].textContent, "28.5 s");
  assert.equal(train[5].textContent, "1.0 GiB (peak 1.1 GiB)");
  assert.equal(train[6].textContent, "1");
  assert.equal(train[7].textContent, "eval (45.0 s)");
  assert.equal(page.cell("stuck", "reason").textContent.trim(), "timeout");
  assert.equal(page.cell("stuck", "attempts").textContent, "2");
  assert.equal(page.element("run-title").textContent, "20261204-120000-abcd");
  assert.deepEqual(page.gets, ["/api/status"]);
  assert.equal(page.sources[0].url, "/api/events");
});

test("a sweep folds into one row with its counts, and opens to its elements", async () => {
  const page = await loadPage(statusFixture());
  assert.equal(page.cell("▸ sweep", "state").textContent, "1 running · 1000 waiting · 1 failed");
  assert.equal(page.cell("▸ sweep", "progress").textContent, "1/1002 ended");
  page.rowOf("▸ sweep").onclick({ target: page.rowOf("▸ sweep") });
  page.runFrames();
  assert.deepEqual(page.rows().map((r) => r[0].trim()), ["train", "prep", "stuck", "▾ sweep (1002)", "sweep[lr=0.1]", "sweep[lr=0.2]"]);
  page.send({ task: "sweep[lr=0.1]", event: "exited", outcome: "succeeded", exit_code: 0 });
  page.runFrames();
  assert.equal(page.cell("▾ sweep", "state").textContent, "1000 waiting · 1 succeeded · 1 failed");
});

test("events move a row's bar, rate and ETA, and its budget counts down between them", async () => {
  const page = await loadPage(statusFixture());
  page.send({ task: "train", event: "progress", completed: 50, total: 100, fraction: 0.5, title: "Epoch 3/5", remaining: 30 });
  page.runFrames();
  assert.equal(page.cell("train", "progress").children[0].children[0].style.width, "50.0%");
  assert.equal(page.cell("train", "remaining").textContent, "30.0 s");
  page.advance(10_000);
  page.send({ task: "train", event: "progress", completed: 70, total: 100, fraction: 0.7, title: "Epoch 3/5", remaining: 30 });
  page.runFrames();
  // From the status's 40 to 70 in 10 s: 3/s, 30 left: 10 s.
  assert.equal(page.cell("train", "rate").textContent, "3.00/s · 10.0 s");
  page.advance(4_000);
  page.tick();
  page.runFrames();
  assert.equal(page.cell("train", "remaining").textContent, "26.0 s");
  page.advance(30_000);
  page.tick();
  page.runFrames();
  assert.equal(page.cell("train", "remaining").textContent, "0 ms");
  page.send({ task: "train", event: "cancel", reason: "timeout", why: "no progress for 30s", grace: 10 });
  page.send({ task: "train", event: "exited", outcome: "cancelled", cancel_reason: "timeout" });
  page.runFrames();
  assert.equal(page.cell("train", "state").textContent, "cancelled");
  assert.equal(page.cell("train", "remaining").textContent, "–");
  assert.equal(page.cell("train", "reason").textContent.trim(), "timeout (no progress for 30s)");
  page.send({ task: "new-one", event: "started", pid: 99 });
  page.runFrames();
  assert.equal(page.cell("new-one", "state").textContent, "running");
  assert.equal(page.cell("new-one", "attempts").textContent, "1");
});

test("task text is only ever text: markup stays text, bidi controls are shown as code points", async () => {
  const evil = "</script><img src=x onerror=alert(1)>\u202Etxt.exe";
  const status = { ok: true, tasks: [{ name: evil, state: "running", pid: 1, remaining: 5,
    progress: { fraction: 0.1, title: "<b>title</b>\u2066", detail: "</script>" } }] };
  const page = await loadPage(status, { routes: { ["/api/tasks/" + encodeURIComponent(evil) + "/log?tail=200"]: "line <img onerror=x>\u202Eevil\n" } });
  const shownName = "</script><img src=x onerror=alert(1)>⟨U+202E⟩txt.exe";
  assert.equal(page.rows()[0][0], shownName);
  assert.equal(page.rows()[0][2], "<b>title</b>⟨U+2066⟩ · </script> · 10%");
  // innerHTML throws in this DOM: had the page written any, the error box would say so.
  assert.equal(page.body.dataset.errors, undefined);
  page.rowOf(shownName).onclick({ target: page.rowOf(shownName) });
  await page.settle();
  page.runFrames();
  assert.equal(page.element("detail-name").textContent, shownName);
  assert.equal(page.element("detail-log").textContent, "line <img onerror=x>⟨U+202E⟩evil\n");
  page.send({ task: evil, event: "phase", name: "\u202Deval" });
  page.runFrames();
  assert.equal(page.cell(shownName, "phase").textContent, "⟨U+202D⟩eval");
  assert.match(page.element("detail-events").children.at(-1).textContent, /^\d\d:\d\d:\d\d\.\d{3} phase /);
});

test("the buttons POST the right path and body, and the row says what came back", async () => {
  const page = await loadPage(statusFixture(), { routes: { "/api/tasks/stuck/extend": { ok: false, error: "already finished" } } });
  page.button("train", "extend").onclick();
  page.element("extend-by").value = "1h30m";
  page.button("stuck", "extend").onclick();
  page.button("train", "revoke").onclick();
  page.button("train", "cancel").onclick();
  page.button("▸ sweep", "cancel").onclick();
  await page.settle();
  assert.deepEqual(page.posts, [
    { url: "/api/tasks/train/extend", body: { seconds: 600 } },
    { url: "/api/tasks/stuck/extend", body: { seconds: 5400 } },
    { url: "/api/tasks/train/revoke", body: {} },
    { url: "/api/tasks/train/cancel", body: {} },
    { url: "/api/tasks/sweep/cancel", body: {} },
  ]);
  page.runFrames();
  assert.equal(page.cell("stuck", "reason").children[1].textContent, " extend refused: already finished");
  assert.ok(page.cell("stuck", "reason").children[1].classList.contains("failed"));
  page.send({ task: "train", event: "budget", remaining: 750, cause: "operator-extend" });
  page.runFrames();
  assert.equal(page.cell("train", "reason").children[1].textContent, " extended: 12m 30s left");
  assert.equal(page.cell("train", "remaining").textContent, "12m 30s");
  // A name with brackets and `=` is one path segment.
  page.element("extend-by").value = "soon";
  page.button("▸ sweep", "cancel").onclick();
  page.rowOf("▸ sweep").onclick({ target: page.rowOf("▸ sweep") });
  page.runFrames();
  page.button("sweep[lr=0.1]", "revoke").onclick();
  await page.settle();
  page.button("sweep[lr=0.1]", "extend").onclick();
  await page.settle();
  assert.equal(page.posts.at(-1).url, "/api/tasks/sweep%5Blr%3D0.1%5D/revoke", "no POST for a bad duration");
  page.runFrames();
  assert.equal(page.cell("sweep[lr=0.1]", "reason").children[1].textContent, " not a duration: soon (say 10m, 90s, 1h30m)");
});

test("Cancel asks first: no POST when the answer is no", async () => {
  const page = await loadPage(statusFixture(), { confirmAnswer: false });
  page.button("train", "cancel").onclick();
  await page.settle();
  assert.deepEqual(page.posts, []);
});

test("a flood of 1,000 progress events writes each row at most once a frame, and none between frames", async () => {
  const tasks = Array.from({ length: 1000 }, (_, i) => ({ name: "t" + i, state: "running", pid: i, remaining: 60, attempts: 1 }));
  const page = await loadPage({ ok: true, tasks });
  const rows = page.element("table-rows").children;
  // Only the rows in view (and a margin) exist: not one per task.
  assert.ok(rows.length < 40, `${rows.length} row elements for 1,000 tasks`);
  writes = new Map();
  for (let i = 0; i < 1000; i++) page.send({ task: "t" + (i % 20), event: "progress", completed: i, total: 1000, remaining: 60 });
  assert.equal(writes.size, 0, "nothing written before the frame");
  assert.equal(page.frames.length, 1, "one frame asked for");
  page.runFrames();
  const written = rows.filter((row) => row.children.some((cell) => allWrites(cell) > 0));
  assert.equal(written.length, 20, "the 20 rows that moved");
  for (const row of rows) {
    const fill = row.children[2].children[0].children[0];
    assert.ok((writes.get(fill) || 0) <= 2, "a bar's width and colour, once each");
    for (const cell of row.children) assert.ok((writes.get(cell) || 0) <= 1, "each cell at most once");
  }
  assert.equal(page.cell("t19", "progress").textContent, "999/1000 · 100%");
  // A second flood over every task: the frame writes only the rows in view.
  writes = new Map();
  for (let i = 0; i < 1000; i++) page.send({ task: "t" + i, event: "progress", completed: 5, total: 10, remaining: 60 });
  page.runFrames();
  assert.ok([...writes.values()].reduce((a, b) => a + b, 0) < rows.length * 12);
});
function allWrites(element) { return (writes.get(element) || 0) + element.children.reduce((n, c) => n + allWrites(c), 0); }

test("the stream drops: it is opened again, then the status read again; the supervisor gone keeps the last state", async () => {
  const page = await loadPage(statusFixture());
  assert.equal(page.element("run-status").textContent, "live");
  page.sources[0].onerror();
  assert.ok(page.sources[0].closed);
  assert.equal(page.element("run-status").textContent, "reconnecting");
  const retry = page.timers.filter((t) => !t.every).at(-1);
  assert.equal(retry.ms, 1000);
  // The supervisor is gone: the new stream fails, and so does the status read that asks why.
  page.setStream("fail");
  page.setStatus(() => { throw new TypeError("Failed to fetch"); });
  retry.f();
  await page.settle();
  page.runFrames();
  assert.match(page.element("banner").textContent, /supervisor is gone.*last state/);
  assert.equal(page.element("banner").hidden, false);
  assert.equal(page.element("run-status").textContent, "gone");
  assert.equal(page.cell("train", "state").textContent, "running", "the last state stays");
  page.advance(5_000);
  page.tick();
  page.runFrames();
  assert.equal(page.cell("train", "remaining").textContent, "28.5 s", "no countdown without the supervisor");
  const next = page.timers.filter((t) => !t.every).at(-1);
  assert.equal(next.ms, 2000, "backing off");
  page.setStream("open");
  page.setStatus({ ok: true, tasks: [{ name: "train", state: "succeeded", attempts: 1 }] });
  next.f();
  await page.settle();
  page.runFrames();
  assert.equal(page.sources.length, 3);
  assert.ok(page.sources[1].closed);
  assert.equal(page.element("run-status").textContent, "live");
  assert.equal(page.element("banner").hidden, true);
  assert.equal(page.cell("train", "state").textContent, "succeeded");
  assert.deepEqual(page.gets.filter((g) => g === "/api/status").length, 3);
});

test("the detail view polls the log every 2 s while open, and stops when closed", async () => {
  const page = await loadPage(statusFixture(), { routes: { "/api/tasks/train/log?tail=200": "epoch 1\nepoch 2\n" } });
  page.rowOf("train").onclick({ target: page.rowOf("train") });
  await page.settle();
  page.runFrames();
  assert.equal(page.element("detail-card").hidden, false);
  assert.equal(page.element("detail-log").textContent, "epoch 1\nepoch 2\n");
  const poll = page.timers.find((t) => t.every && t.ms === 2000);
  assert.ok(poll);
  poll.f();
  await page.settle();
  assert.equal(page.gets.filter((g) => g.startsWith("/api/tasks/train/log")).length, 2);
  page.send({ task: "train", event: "progress", completed: 41, total: 100 });
  page.runFrames();
  assert.match(page.element("detail-events").children.at(-1).textContent, /progress \{"completed":41,"total":100\}/);
  page.element("detail-close").onclick();
  assert.ok(poll.cleared);
  assert.equal(page.element("detail-card").hidden, true);
});

// ---- the timeline (timeline.js, fed by live.js) ----
const AXIS = 26, GUTTER = 118;
// The rectangles of bars drawn in lane `lane` (30 px high, 4 px in) since `drawn` was reset.
function barsIn(lane) { return drawn.rects.filter((r) => r[2] === AXIS + lane * 30 + 4 && r[4] === 22); }
// The striped bars (a pattern, not a colour) of running attempts, `h` px high.
const runningBars = (h) => drawn.rects.filter((r) => typeof r[0] === "object" && r[4] === h);
// Each draw clears the whole canvas first (and then the axis's strip, AXIS high).
const backgrounds = () => drawn.rects.filter((r) => r[0] === "#ffffff" && r[1] === 0 && r[2] === 0 && r[4] !== AXIS).length;
// The report's outcome colours (common.js).
const COLORS = { succeeded: "#2f9e62", failed: "#d9453d", cancelled: "#f0a020" };

test("a started and an exited line draw a bar in the outcome's colour; the lanes grow as attempts overlap", async () => {
  const page = await loadPage({ ok: true, run: "r1", tasks: [{ name: "a", attempts: 0, state: "waiting" }, { name: "b", attempts: 0, state: "waiting" }] });
  assert.equal(page.element("run-title").textContent, "r1");
  assert.equal(page.document.title, "Overtime live r1");
  page.send({ task: "a", event: "started", pid: 1 });
  page.runFrames();
  assert.ok(drawn.texts.some((t) => t[0] === "slot 1"), "a lane for the first slot");
  assert.equal(page.element("timeline").style.height, AXIS + 30 + 6 + "px");
  assert.equal(barsIn(0).filter((r) => r[0] === COLORS.succeeded).length, 0, "striped while it runs");
  page.advance(4_000);
  page.send({ task: "b", event: "attempt", attempt: 1, resources: { gpu: ["0"] } });
  page.send({ task: "b", event: "started", pid: 2 });
  page.advance(2_000);
  page.send({ task: "a", event: "exited", outcome: "succeeded", exit_code: 0, progress: { completed: 40, total: 40, fraction: 1 } });
  page.advance(2_000);
  page.send({ task: "b", event: "cancel", reason: "timeout", grace: 10 });
  page.send({ task: "b", event: "exited", outcome: "cancelled", exit_code: 124 });
  drawn = { rects: [], texts: [] };
  page.runFrames();
  // b held GPU 0: its lane comes first, as in the report; a's slot moved down.
  assert.ok(drawn.texts.some((t) => t[0] === "GPU 0") && drawn.texts.some((t) => t[0] === "slot 1"));
  assert.equal(page.element("timeline").style.height, AXIS + 2 * 30 + 6 + "px");
  const [cancelled] = barsIn(0).filter((r) => r[0] === COLORS.cancelled);
  const [succeeded] = barsIn(1).filter((r) => r[0] === COLORS.succeeded);
  assert.ok(cancelled && succeeded, JSON.stringify(drawn.rects));
  // a ran 0 to 6 s, b 4 to 8 s, on one axis whose right edge is now (8 s).
  const px = (800 - GUTTER - 14) / (8000 + 8000 * 0.015);
  assert.ok(Math.abs(succeeded[3] - 6000 * px) <= 2, `a's bar ${succeeded[3]} px for 6 s`);
  assert.ok(Math.abs(cancelled[3] - 4000 * px) <= 2, `b's bar ${cancelled[3]} px for 4 s`);
  assert.ok(Math.abs(cancelled[1] + cancelled[3] - 800 + 14) <= 2, "b ends at the right edge: now");
  assert.ok(drawn.texts.some((t) => t[0] === "timeout"), "the cancel's reason beside its mark");
  assert.equal(page.cell("a", "progress").textContent, "40/40 · 100%", "the exited line's last progress");
  assert.ok(drawn.rects.some((r) => r[0] === "#111827" && r[3] === 2), "the cancel's mark");
  // The next attempt of a goes into the slot that is free.
  page.send({ task: "a", event: "started", pid: 3 });
  page.runFrames();
  assert.equal(page.element("timeline").style.height, AXIS + 2 * 30 + 6 + "px");
});

test("a task running at load is a bar from its elapsed; the right edge moves at most 4 times a second, once a frame", async () => {
  const page = await loadPage(statusFixture());
  const nowTimer = page.timers.find((t) => t.every && t.ms === 250);
  assert.ok(nowTimer, "a 250 ms timer moves now");
  drawn = { rects: [], texts: [] };
  page.advance(250);
  nowTimer.f();
  page.runFrames();
  assert.equal(backgrounds(), 1);
  // train has run 73.2 s: its bar spans the plot, striped (a pattern, not a colour).
  const [bar] = barsIn(0);
  assert.ok(bar && typeof bar[0] === "object" && bar[3] > 600, JSON.stringify(bar));
  drawn = { rects: [], texts: [] };
  for (let i = 0; i < 1000; i++) page.send({ task: "train", event: "progress", completed: 40 + i / 100, total: 100, remaining: 30 });
  for (let i = 0; i < 150; i++) page.send({ task: "t" + i, event: "started", pid: i });
  page.runFrames();
  assert.equal(backgrounds(), 1, "a flood of events is one draw");
  // 151 lanes of 5 px: the canvas is 540 px high, and only the lanes in it are drawn.
  assert.equal(page.element("timeline").style.height, "540px");
  assert.equal(page.element("timeline-spacer").style.height, AXIS + 151 * 5 + 6 - 540 + "px");
  const bars = runningBars(5).length;
  assert.ok(bars > 90 && bars <= (540 - AXIS) / 5 + 1, `${bars} bars drawn`);
});

test("what the timeline shows of a task is text: its label, marks and tooltip", async () => {
  const evil = "<img src=x onerror=alert(1)>\u202Etxt.exe";
  const page = await loadPage({ ok: true, tasks: [{ name: evil, state: "running", pid: 1, elapsed: 10, remaining: 5 }] });
  page.send({ task: evil, event: "operator", action: "<b>extend</b> 10m" });
  page.advance(250);
  page.runFrames();
  const shownName = "<img src=x onerror=alert(1)>⟨U+202E⟩txt.exe";
  assert.ok(drawn.texts.some((t) => t[0] === shownName), "the bar's label, bidi control shown");
  assert.ok(drawn.texts.some((t) => t[0] === "<b>extend</b> 10m"));
  const canvas = page.element("timeline");
  for (const handler of page.window.listeners.mousemove) handler({ target: canvas, offsetX: 700, offsetY: AXIS + 15, clientX: 700, clientY: 50 });
  const tooltip = page.element("tooltip");
  assert.equal(tooltip.hidden, false);
  assert.equal(tooltip.children[0].textContent, shownName + "  attempt 1");
  assert.match(tooltip.textContent, /operator at \+10\.\d+ s: <b>extend<\/b> 10m/);
  assert.equal(page.body.dataset.errors, undefined);
});

test("a batch's finished line: a skip is shown, and a cancelled attempt's outcome stays over its `failed`", async () => {
  const page = await loadPage(statusFixture());
  page.send({ task: "train", event: "cancel", reason: "user" });
  page.send({ task: "train", event: "exited", outcome: "cancelled", cancel_reason: "user" });
  page.send({ task: "train", event: "finished", state: "failed", reason: "user", attempts: 1 });
  page.send({ task: "later", event: "finished", state: "skipped", reason: "dependency", detail: "'train' did not succeed", attempts: 0 });
  page.runFrames();
  assert.equal(page.cell("train", "state").textContent, "cancelled");
  assert.match(page.cell("train", "reason").textContent, /user/);
  assert.equal(page.cell("later", "state").textContent, "skipped");
  assert.match(page.cell("later", "reason").textContent, /'train' did not succeed/);
});

test("the status read again every 5 s gives memory and the hard limit; an event newer than it keeps its state", async () => {
  const fixture = statusFixture();
  fixture.tasks[0].max_runtime_remaining = 600;
  fixture.tasks[0].memory_max = 2147483648;
  const page = await loadPage(fixture);
  assert.equal(page.cell("train", "remaining").textContent, "28.5 s · max 10m 00s");
  assert.equal(page.cell("train", "memory").textContent, "1.0 GiB / 2.0 GiB");
  page.sources[0].readyState = 1;
  // The status is asked for; before it answers, train exits.
  let answer;
  const later = statusFixture();
  later.tasks[0].memory = 1610612736;
  later.tasks[0].memory_max = 2147483648;
  page.setStatus(() => new Promise((resolve) => { answer = resolve; }));
  page.timers.filter((t) => t.every && t.ms === 5000).forEach((t) => t.f());
  assert.deepEqual(page.gets, ["/api/status", "/api/status"]);
  page.send({ task: "train", event: "exited", outcome: "succeeded", exit_code: 0 });
  answer({ ok: true, status: 200, json: async () => later, text: async () => JSON.stringify(later) });
  await page.settle();
  page.runFrames();
  assert.equal(page.cell("train", "state").textContent, "succeeded", "the older status does not bring it back to running");
  assert.equal(page.cell("train", "memory").textContent, "1.5 GiB / 2.0 GiB");
});

test("the status read again says `failed` of an ended task: the exited line's outcome stays, a new attempt's state is taken", async () => {
  const page = await loadPage(statusFixture());
  page.send({ task: "train", event: "cancel", reason: "timeout" });
  page.send({ task: "train", event: "kill", signal: "SIGKILL" });
  page.send({ task: "train", event: "exited", outcome: "killed", exit_code: 137 });
  page.runFrames();
  assert.equal(page.cell("train", "state").textContent, "killed");
  page.sources[0].readyState = 1;
  const later = statusFixture();
  Object.assign(later.tasks[0], { state: "failed", pid: null, remaining: null });
  later.tasks[2].state = "retrying";
  page.setStatus(later);
  page.timers.filter((t) => t.every && t.ms === 5000).forEach((t) => t.f());
  await page.settle();
  page.runFrames();
  assert.equal(page.cell("train", "state").textContent, "killed", "status's `failed` does not paint over `killed`");
  assert.match(page.element("counts").textContent, / 1 failed · 1 killed$/, "sweep[lr=0.2] the one failed");
  // Where either side is not ended, the status's state is taken.
  assert.equal(page.cell("stuck", "state").textContent, "retrying");
  later.tasks[0].state = "running";
  page.timers.filter((t) => t.every && t.ms === 5000).forEach((t) => t.f());
  await page.settle();
  page.runFrames();
  assert.equal(page.cell("train", "state").textContent, "running");
});

test("the event stream is opened before the status is read: an event that comes during the read is kept", async () => {
  let answer;
  const page = await loadPage(() => new Promise((resolve) => { answer = resolve; }), { stream: "hold" });
  assert.equal(page.sources.length, 1, "the stream is asked for first");
  assert.deepEqual(page.gets, []);
  page.sources[0].open();
  assert.deepEqual(page.gets, ["/api/status"], "the status is read once the stream is open");
  // train ends while its status (still running) is on its way.
  page.send({ task: "train", event: "exited", outcome: "succeeded", exit_code: 0 });
  answer(response(200, statusFixture()));
  await page.settle();
  page.runFrames();
  assert.equal(page.cell("train", "state").textContent, "succeeded");
  assert.equal(page.element("run-status").textContent, "live");
  assert.equal(page.element("banner").hidden, true);
  // A stream that never opens is asked about by a status read: refused, the page says so.
  page.sources[0].onerror();
  const retry = page.timers.filter((t) => !t.every).at(-1);
  assert.equal(retry.ms, 1000);
  page.setStream("fail");
  page.setStatus(() => response(401, { ok: false, error: "the live page needs its token" }));
  retry.f();
  await page.settle();
  assert.ok(page.sources[1].closed);
  assert.match(page.element("banner").textContent, /refused this page/);
  assert.equal(page.element("run-status").textContent, "gone");
  assert.equal(page.timers.filter((t) => !t.every).at(-1).ms, 2000, "backing off");
});

test("the card's events: formatted only when shown; past 500, the first item goes and the others stay", async () => {
  const page = await loadPage(statusFixture());
  stringified = 0;
  for (let i = 0; i < 1000; i++) page.send({ task: "train", event: "progress", completed: i, total: 1000 });
  page.runFrames();
  assert.equal(stringified, 0, "no card open: no event is formatted");
  page.rowOf("train").onclick({ target: page.rowOf("train") });
  await page.settle();
  page.runFrames();
  const list = page.element("detail-events");
  assert.equal(list.children.length, 500);
  assert.match(list.children[0].textContent, /progress \{"completed":500,"total":1000\}$/);
  assert.equal(stringified, 500);
  const before = [...list.children];
  writes = new Map();
  page.send({ task: "train", event: "progress", completed: 1000, total: 1000 });
  page.runFrames();
  assert.equal(list.children.length, 500);
  assert.equal(list.children[0], before[1], "the items kept are the same elements");
  assert.equal(list.children[498], before[499]);
  assert.match(list.children[499].textContent, /progress \{"completed":1000,"total":1000\}$/);
  assert.equal(writes.get(list), 1, "one item removed, the list not written anew");
  assert.equal(stringified, 501);
  // More let go in one frame than the list holds: it is the last 500 still.
  for (let i = 0; i < 700; i++) page.send({ task: "train", event: "heartbeat", n: i });
  page.runFrames();
  assert.equal(list.children.length, 500);
  assert.match(list.children[0].textContent, /heartbeat \{"n":200\}$/);
  assert.match(list.children[499].textContent, /heartbeat \{"n":699\}$/);
});

test("the log is read once at a time, and a task with no log is not asked again", async () => {
  const answers = [];
  const noLog = { ok: false, error: "overtime run keeps no log file: its task's output goes to the supervisor's own stdout and stderr" };
  const page = await loadPage({ ok: true, tasks: [{ name: "train", state: "running", pid: 1, attempts: 1 },
    { name: "run", state: "running", pid: 2, attempts: 1 }, { name: "later", state: "waiting", attempts: 0 }] }, { routes: {
    "/api/tasks/train/log?tail=200": () => new Promise((resolve) => answers.push(resolve)),
    "/api/tasks/run/log?tail=200": () => response(404, noLog),
    "/api/tasks/later/log?tail=200": () => response(404, { ok: false, error: "the task has no log yet" }),
  } });
  const logReads = (name) => page.gets.filter((g) => g === "/api/tasks/" + name + "/log?tail=200").length;
  page.rowOf("train").onclick({ target: page.rowOf("train") });
  const poll = () => page.timers.filter((t) => t.every && t.ms === 2000 && !t.cleared).forEach((t) => t.f());
  // A stalled read: the polls while it is out ask for nothing more.
  poll(); poll(); poll();
  await page.settle();
  assert.equal(logReads("train"), 1);
  answers[0](response(200, "epoch 1\n"));
  await page.settle();
  assert.equal(page.element("detail-log").textContent, "epoch 1\n");
  poll();
  assert.equal(logReads("train"), 2, "the next poll reads again");
  // `overtime run` keeps no log: one read, then the card says so and stops asking.
  page.rowOf("run").onclick({ target: page.rowOf("run") });
  await page.settle();
  poll(); poll();
  await page.settle();
  assert.equal(logReads("run"), 1);
  assert.equal(page.element("log-note").textContent, "no log: " + noLog.error + " (not asked again)");
  assert.ok(page.timers.filter((t) => t.every && t.ms === 2000).every((t) => t.cleared));
  // A task that has not started has no log yet: it is asked again.
  page.rowOf("later").onclick({ target: page.rowOf("later") });
  await page.settle();
  poll();
  await page.settle();
  assert.equal(logReads("later"), 2);
  assert.equal(page.element("log-note").textContent, "not read: the task has no log yet");
});

test("a skipped task's name on the timeline has its bidi controls shown", async () => {
  const evil = "<b>prep</b>\u202Etxt.exe";
  const page = await loadPage({ ok: true, tasks: [{ name: "a", state: "running", pid: 1, elapsed: 10, remaining: 5 }] });
  page.send({ task: evil, event: "skipped", reason: "dependency" });
  page.advance(250);
  drawn = { rects: [], texts: [] };
  page.runFrames();
  assert.ok(drawn.texts.some((t) => t[0] === "<b>prep</b>⟨U+202E⟩txt.exe"), JSON.stringify(drawn.texts));
  assert.ok(!drawn.texts.some((t) => t[0].includes("\u202E")), "no raw bidi control drawn");
});

test("under a memory-max the row says now / max, and the peak is said against the max in the card and the tooltip", async () => {
  const MiB = 1048576;
  const page = await loadPage({ ok: true, tasks: [{ name: "train", state: "running", pid: 1, attempts: 1, remaining: 30,
    memory: 650 * MiB, peak_memory: 770 * MiB, memory_max: 700 * MiB }, { name: "free", state: "running", pid: 2, memory: 100 * MiB, peak_memory: 120 * MiB }] });
  assert.equal(page.cell("train", "memory").textContent, "650 MiB / 700 MiB", "the row keeps its width: now / max");
  assert.equal(page.cell("train", "memory").title, "peak 770 MiB of max 700 MiB");
  assert.equal(page.cell("free", "memory").textContent, "100 MiB (peak 120 MiB)");
  assert.equal(page.cell("free", "memory").title, "");
  page.rowOf("train").onclick({ target: page.rowOf("train") });
  await page.settle();
  page.runFrames();
  assert.match(page.element("detail-facts").textContent, /memory: 650 MiB \/ 700 MiB   peak: 770 MiB of max 700 MiB/);
});

test("a task heard of first by its progress during the status read takes its state, pid and attempts from the status", async () => {
  let answer;
  const page = await loadPage(() => new Promise((resolve) => { answer = resolve; }), { stream: "hold" });
  page.sources[0].open();
  // The page opened after train started: during the read it hears train's progress only.
  page.send({ task: "train", event: "progress", completed: 41, total: 100, remaining: 30 });
  answer(response(200, statusFixture()));
  await page.settle();
  page.runFrames();
  assert.equal(page.cell("train", "state").textContent, "running");
  assert.equal(page.cell("train", "attempts").textContent, "1");
  assert.equal(page.cell("train", "progress").textContent, "41/100 · 41%", "the event's progress, newer than the status's");
  assert.equal(page.cell("train", "remaining").textContent, "30.0 s");
  assert.match(page.element("counts").textContent, /^2 running · 1 cancelling/);
  page.rowOf("train").onclick({ target: page.rowOf("train") });
  page.runFrames();
  assert.match(page.element("detail-facts").textContent, /^pid: 4242 /);
});
