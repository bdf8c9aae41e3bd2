// The report page's own tests: the real page.js, run by node (node:test, no packages) against
// the elements page.html declares and a run's data written here. What the page writes into
// those elements is what is checked: the header, the table's durations and sizes, filtering,
// hiding by outcome, sorting, escaping, hovering the timeline, a task named by the address.
// Drawing itself (the canvas) is Chromium's to test (Tests/OvertimeTests/CLIRunReportTests).
// Run: node --test Tests/ReportPage/page.test.mjs   (scripts/test-page runs it, and scripts/test)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

const pageDirectory = fileURLToPath(new URL("../../Sources/OvertimeReport/Page/", import.meta.url));
const script = readFileSync(pageDirectory + "page.js", "utf8");
const html = readFileSync(pageDirectory + "page.html", "utf8");
const declaredIDs = new Set([...html.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]));

class FakeElement {
  constructor(id) {
    Object.assign(this, { id, textContent: "", innerHTML: "", hidden: false, className: "", value: "", width: 0, height: 0,
      scrollTop: 0, clientWidth: 1200, clientHeight: 420, offsetWidth: 240, offsetHeight: 90 });
    this.dataset = {};
    this.style = {};
    this.listeners = {};
    this.classes = new Set();
    const classes = this.classes;
    this.classList = {
      add: (...names) => names.forEach((n) => classes.add(n)),
      remove: (...names) => names.forEach((n) => classes.delete(n)),
      toggle: (name, on) => (on ? classes.add(name) : classes.delete(name)),
    };
  }
  addEventListener(type, handler) { (this.listeners[type] ||= []).push(handler); }
  // An event on this element; `target` may stand for a child (what `closest` finds).
  dispatch(type, fields = {}) {
    for (const handler of this.listeners[type] || []) handler({ target: this, preventDefault() {}, ...fields });
  }
  getContext() { return fakeCanvasContext(); }
  getBoundingClientRect() { return { left: 0, top: 0, width: this.clientWidth, height: 300 }; }
  querySelectorAll() { return []; }
  closest() { return null; }
}

// A 2D context that takes every call and setting; text is 6 px a character wide.
function fakeCanvasContext() {
  const settings = {};
  return new Proxy(settings, {
    get(target, name) {
      if (name === "measureText") return (text) => ({ width: String(text).length * 6 });
      if (name in target) return target[name];
      return () => ({});
    },
    set(target, name, value) { target[name] = value; return true; },
  });
}

// The page loaded with `data` (and the address `hash`): its elements, its address, its frames.
function loadPage(data, hash = "") {
  const elements = new Map();
  const body = new FakeElement("body");
  const frames = [];
  const addresses = [];
  const document = {
    body,
    title: "",
    // As a browser's: only what page.html declares, or what the script has written since.
    getElementById(id) {
      if (!elements.has(id)) {
        const written = [...elements.values()].some((e) => e.innerHTML.includes(`id="${id}"`));
        if (!declaredIDs.has(id) && !written) return null;
        elements.set(id, new FakeElement(id));
      }
      return elements.get(id);
    },
    createElement: () => new FakeElement(null),
    addEventListener() {},
  };
  document.getElementById("run-data").textContent = JSON.stringify(data);
  const window = { devicePixelRatio: 1, innerWidth: 1400, innerHeight: 900, scrollX: 0, scrollY: 0, listeners: {},
    addEventListener(type, handler) { (this.listeners[type] ||= []).push(handler); } };
  const context = { document, window, requestAnimationFrame: (f) => frames.push(f),
    history: { replaceState: (state, title, url) => addresses.push(url) },
    location: { hash, pathname: "/report.html" }, performance: { now: () => 12 } };
  vm.runInNewContext(script, context, { filename: pageDirectory + "page.js" });
  const element = (id) => document.getElementById(id);
  return {
    element, body, document, window, addresses,
    runFrames() { while (frames.length) frames.shift()(); },
    // Each row of the table: its cells' text, tags taken out.
    rows() {
      return element("table-rows").innerHTML.split('<div class="row').slice(1).map((row) =>
        [...row.slice(row.indexOf(">") + 1).matchAll(/<div[^>]*>(.*?)<\/div>/g)].map((cell) => text(cell[1])));
    },
    names() { return this.rows().map((cells) => cells[0]); },
    filter(words) { element("filter").value = words; element("filter").dispatch("input"); },
    sortBy(column) {
      const cell = { dataset: { column: String(column) }, classList: { add() {} } };
      element("table-head").dispatch("click", { target: { closest: () => cell } });
    },
    toggleOutcome(outcome) {
      const chip = { dataset: { outcome }, classList: { toggle() {} } };
      element("counts").dispatch("click", { target: { closest: () => chip } });
    },
  };
}

function text(markup) {
  return markup.replace(/<[^>]*>/g, "").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'").replace(/&amp;/g, "&");
}

function attempt(fields) {
  return { n: 1, start: 0, end: null, outcome: "succeeded", as: null, exit: 0, cancel: null, lanes: [0], gpus: [], peak: null,
    source: null, title: null, detail: null, retry: null, marks: [], moreMarks: 0, progress: [], ...fields };
}

function task(name, outcome, attempts, fields = {}) {
  const last = attempts[attempts.length - 1];
  return { name, state: outcome, outcome, reason: null, detail: null, exit: last ? last.exit : null,
    finished: last ? last.end : null, result: null, resumed: false, peak: last ? last.peak : null, attempts, ...fields };
}

// Five tasks whose last attempts ran 40 s, 450 ms, 2.5 s, 12.3 s and 1 h 2 min 5 s. As in a
// real run, no two attempts of one lane overlap (the page's search of a lane relies on it).
function run() {
  return {
    run: "20260102-030405-abcd", runs: [{ id: "20260102-030405-abcd", start: 0 }], startedAt: Date.UTC(2026, 0, 2, 3, 4, 5),
    end: 3_800_000, complete: true, stoppedBy: null, concurrency: 2, lines: 40, unreadable: 0,
    lanes: [{ label: "slot 1", gpu: null }, { label: "slot 2", gpu: null }, { label: "GPU 0", gpu: "0" }],
    tasks: [
      task("prepare", "succeeded", [attempt({ end: 40_000, peak: 512, progress: [0, 0, 20_000, 0.5, 40_000, 1] })]),
      task("flaky", "failed", [
        attempt({ n: 1, start: 40_000, end: 41_000, outcome: "failed", exit: 1, lanes: [1], retry: "exit 1" }),
        attempt({ n: 2, start: 42_000, end: 42_450, outcome: "failed", exit: 1, lanes: [1], peak: 1536 }),
      ], { detail: '<b>bold & "quoted"</b>' }),
      task("stall", "cancelled", [attempt({ start: 1_000, end: 3_500, outcome: "cancelled", exit: null, cancel: "timeout",
        lanes: [1], peak: 20 * 1024 * 1024, marks: [[2_700, "cancel", "timeout"]] })], { reason: "timeout" }),
      task("train", "succeeded", [attempt({ start: 0, end: 12_300, lanes: [2], gpus: ["0"], peak: 3 * 1024 ** 3 })]),
      task("long", "succeeded", [attempt({ start: 50_000, end: 3_775_000, lanes: [1] })]),
    ],
  };
}

test("the page draws a run with no error, and says so in the body's data", () => {
  const page = loadPage(run());
  page.runFrames();
  assert.equal(page.body.dataset.errors, undefined);
  assert.equal(page.element("errors").textContent, "");
  assert.equal(page.body.dataset.rendered, "5");
  assert.equal(page.body.dataset.lanes, "3");
  assert.equal(page.element("run-title").textContent, "20260102-030405-abcd");
  assert.equal(page.element("run-status").textContent, "finished");
  const facts = page.element("facts").innerHTML;
  for (const fact of ["<dt>started</dt><dd>2026-01-02 03:04:05 UTC</dd>", "<dt>elapsed</dt><dd>1h 03m</dd>",
    "<dt>attempts</dt><dd>6 (1 retried)</dd>", "<dt>lanes</dt><dd>2 slots + 1 GPU</dd>", "<dt>concurrency</dt><dd>2</dd>"]) {
    assert.ok(facts.includes(fact), `${fact} in ${facts}`);
  }
});

test("durations, times and sizes as the table shows them", () => {
  const page = loadPage(run());
  const rows = Object.fromEntries(page.rows().map((cells) => [cells[0], cells]));
  // name, outcome, reason, attempts, start, duration, exit, peak memory, progress
  assert.deepEqual(["prepare", "flaky", "stall", "train", "long"].map((n) => rows[n][5]),
    ["40.0 s", "450 ms", "2.50 s", "12.3 s", "1h 02m"]);
  assert.deepEqual(["prepare", "flaky", "stall", "train", "long"].map((n) => rows[n][7].trim()),
    ["512 B", "1.5 KiB", "20 MiB", "3.0 GiB", "–"]);
  assert.equal(rows.flaky[4], "+40.0 s");
  assert.equal(rows.flaky[3], "2");
  assert.equal(rows.stall[6], "–");
  assert.equal(rows.prepare[8], "100%");
});

test("what a task printed is shown as text, never as markup", () => {
  const page = loadPage(run());
  const markup = page.element("table-rows").innerHTML;
  assert.ok(!markup.includes("<b>bold"), markup);
  assert.ok(markup.includes("&lt;b&gt;bold &amp; &quot;quoted&quot;&lt;/b&gt;"), markup);
});

test("the filter keeps the tasks whose name, reason, detail or outcome hold its words", () => {
  const page = loadPage(run());
  assert.equal(page.element("shown").textContent, "5 tasks");
  page.filter("  TIMEOUT ");
  assert.deepEqual(page.names(), ["stall"]);
  assert.equal(page.element("shown").textContent, "showing 1 of 5");
  page.filter("failed");
  assert.deepEqual(page.names(), ["flaky"]);
  page.filter("quoted");
  assert.deepEqual(page.names(), ["flaky"]);
  page.filter("nothing has this");
  assert.deepEqual(page.names(), []);
  page.filter("");
  assert.equal(page.names().length, 5);
});

test("an outcome's count hides and shows its tasks", () => {
  const page = loadPage(run());
  assert.ok(page.element("counts").innerHTML.includes('data-outcome="succeeded"'));
  page.toggleOutcome("succeeded");
  assert.deepEqual(page.names(), ["flaky", "stall"]);
  page.toggleOutcome("succeeded");
  assert.equal(page.names().length, 5);
});

test("a header sorts by its column, then the other way; ties keep the journal's order", () => {
  const page = loadPage(run());
  page.sortBy(5);   // duration
  assert.deepEqual(page.names(), ["flaky", "stall", "train", "prepare", "long"]);
  page.sortBy(5);
  assert.deepEqual(page.names(), ["long", "prepare", "train", "stall", "flaky"]);
  page.sortBy(1);   // outcome, in the legend's order
  assert.deepEqual(page.names(), ["prepare", "train", "long", "flaky", "stall"]);
  page.sortBy(1);
  assert.deepEqual(page.names(), ["stall", "flaky", "long", "train", "prepare"]);
  page.filter("succeeded");
  assert.deepEqual(page.names(), ["long", "train", "prepare"], "the filter keeps the order");
});

test("the memory card lists the peaks, highest first", () => {
  const page = loadPage(run());
  const names = [...page.element("memory").innerHTML.matchAll(/<div class="name"[^>]*>([^<]*)</g)].map((m) => m[1]);
  assert.deepEqual(names, ["train", "stall", "flaky", "prepare"]);
});

test("hovering a bar describes its attempt", () => {
  const page = loadPage(run());
  const canvas = page.element("timeline");
  // The page's own mapping: 1.5 % of the run as margin each side, the plot right of a 118 px gutter.
  const pad = 3_800_000 * 0.015, plot = canvas.clientWidth - 118 - 14;
  const x = 118 + (20_000 + pad) / (3_800_000 + 2 * pad) * plot;
  const move = (offsetY) => page.window.listeners.mousemove.forEach((handler) =>
    handler({ target: canvas, offsetX: x, offsetY, clientX: x, clientY: offsetY }));
  move(26 + 15);   // lane 0, below the 26 px axis, lanes 30 px high
  const tooltip = page.element("tooltip");
  assert.equal(tooltip.hidden, false);
  assert.ok(tooltip.innerHTML.includes("<b>prepare</b>") && tooltip.innerHTML.includes("ran 40.0 s"), tooltip.innerHTML);
  assert.ok(tooltip.innerHTML.includes("03:04:05 UTC"), tooltip.innerHTML);
  move(10);        // the axis
  assert.equal(tooltip.hidden, true);
});

test("the address opens the page on a task; a name it cannot decode is passed over", () => {
  const chosen = loadPage(run(), "#task=stall");
  chosen.runFrames();
  const card = chosen.element("detail-card");
  assert.equal(card.hidden, false);
  assert.ok(card.innerHTML.includes('<h2 class="name">stall</h2>'), "the card is stall's");
  assert.ok(card.innerHTML.includes("timeout at +2.70 s"), "the attempts table says when the cancel was sent");
  assert.deepEqual(chosen.addresses, ["#task=stall"]);

  const garbled = loadPage(run(), "#task=%E0");
  assert.equal(garbled.element("detail-card").innerHTML, "", "no task is chosen");
  assert.deepEqual(garbled.addresses, []);
  assert.equal(garbled.body.dataset.errors, undefined);
});
