// The report page's own tests: its real script (groups.js, phases.js, then page.js, in page.html's one
// <script> element, as the build puts them there), run by node (node:test, no packages)
// against the elements page.html declares and a run's data written here. What the page
// writes into those elements is what is checked: the header, the table's durations and
// sizes, filtering, hiding by outcome, sorting, escaping, hovering the timeline, a task named
// by the address.
// Drawing itself (the canvas) is Chromium's to test (Tests/OvertimeTests/CLIRunReportTests).
// Run: node --test Tests/ReportPage/page.test.mjs   (scripts/test-page runs it, and scripts/test)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

const pageDirectory = fileURLToPath(new URL("../../Sources/OvertimeReport/Page/", import.meta.url));
const html = readFileSync(pageDirectory + "page.html", "utf8");
// page.html's script element as the build fills it (Sources/report-page): each `{{name.js}}`
// hole is that file, without the newline that ends it.
const script = html.match(/<script(?: nonce="\{\{nonce\}\}")?>(\{\{[^<]*)<\/script>/)[1].replace(/\{\{([^}]+\.js)\}\}/g, (hole, name) =>
  readFileSync(pageDirectory + name, "utf8").replace(/\n$/, ""));
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

// Every rectangle the page's canvases filled since the page was loaded: [fillStyle, x, y, w, h].
let filled = [];

// A 2D context that takes every call and setting; text is 6 px a character wide.
function fakeCanvasContext() {
  const settings = {};
  return new Proxy(settings, {
    get(target, name) {
      if (name === "measureText") return (text) => ({ width: String(text).length * 6 });
      if (name === "fillRect") return (...rect) => filled.push([target.fillStyle, ...rect]);
      if (name in target) return target[name];
      return () => ({});
    },
    set(target, name, value) { target[name] = value; return true; },
  });
}

// The page loaded with `data` (and the address `hash`): its elements, its address, its frames.
function loadPage(data, hash = "") {
  filled = [];
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
  vm.runInNewContext(script, context, { filename: pageDirectory + "page.html <script>" });
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

test("each phase shades its part of the bar in its own colour, named in the legend and on hover; a stall darkens its part", () => {
  const data = run();
  data.end = 20_000;
  data.phases = ["compile", "step"];
  const train = data.tasks[3].attempts[0];
  Object.assign(train, { phases: [0, 0, 4_000, 1], stalls: [6_000, 8_000], marks: [[10_000, "advice", "advised to checkpoint"]] });
  const page = loadPage(data);
  page.runFrames();
  assert.equal(page.body.dataset.errors, undefined, page.element("errors").textContent);
  const legend = page.element("legend").innerHTML;
  const colour = (name) => legend.match(new RegExp('background:(#[0-9a-f]{6})"></span>phase ' + name))?.[1];
  assert.ok(colour("compile") && colour("step") && colour("compile") !== colour("step"), legend);
  assert.ok(legend.includes("stalled"), legend);
  // The page's mapping, as in the hover test: the train bar is in lane 2 (GPU 0).
  const pad = 20_000 * 0.015, plot = page.element("timeline").clientWidth - 118 - 14;
  const X = (t) => 118 + (t + pad) / (20_000 + 2 * pad) * plot;
  const laneTop = 26 + 2 * 30, barFoot = laneTop + 30 - 4;
  const shades = (c) => filled.filter((f) => f[0] === c && f[2] + f[4] === barFoot && f[2] > laneTop + 4);
  const [compile] = shades(colour("compile")), [step] = shades(colour("step"));
  assert.ok(compile && Math.abs(compile[1] - X(0)) <= 1 && Math.abs(compile[1] + compile[3] - X(4_000)) <= 1, JSON.stringify(compile));
  assert.ok(step && Math.abs(step[1] - X(4_000)) <= 1 && Math.abs(step[1] + step[3] - X(12_300)) <= 1, JSON.stringify(step));
  const [stall] = filled.filter((f) => String(f[0]).startsWith("rgba(17,24,39"));
  assert.ok(stall && Math.abs(stall[1] - X(6_000)) <= 1 && Math.abs(stall[1] + stall[3] - X(8_000)) <= 1, JSON.stringify(stall));
  const canvas = page.element("timeline"), tooltip = page.element("tooltip");
  const hover = (t) => {
    page.window.listeners.mousemove.forEach((handler) =>
      handler({ target: canvas, offsetX: X(t), offsetY: laneTop + 15, clientX: X(t), clientY: laneTop + 15 }));
    return tooltip.innerHTML;
  };
  assert.ok(hover(2_000).includes("phase <b>compile</b> from +0"), tooltip.innerHTML);
  assert.ok(hover(9_000).includes("phase <b>step</b> from +4.00 s for 8.30 s"), tooltip.innerHTML);
  assert.ok(tooltip.innerHTML.includes("stalled at +6.00 s, resumed after 2.00 s"), tooltip.innerHTML);
  assert.ok(tooltip.innerHTML.includes("advice at +10.0 s: advised to checkpoint"), tooltip.innerHTML);
  assert.ok(hover(2_000).includes("2 phases named"), tooltip.innerHTML);
});

test("a phase name is text, never markup; a run without phases has no phase in its legend", () => {
  const data = run();
  data.phases = ["<img src=x>"];
  data.tasks[0].attempts[0].phases = [0, 0];
  const page = loadPage(data);
  page.runFrames();
  assert.ok(page.element("legend").innerHTML.includes("phase &lt;img src=x&gt;"));
  assert.ok(!loadPage(run()).element("legend").innerHTML.includes("phase"));
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

// A run with a sweep (train, a matrix of lr × seed whose elements report results) and an
// array (shard), between two plain tasks. As RunReportPage writes it, a field that holds
// its default may be left out (shard[10] has no attempts at all).
function sweepRun() {
  const element = (name, outcome, params, fields, start, end, extra = {}) =>
    task(name, outcome, [attempt({ start, end, outcome, exit: outcome === "succeeded" ? 0 : 1, lanes: [start % 2], peak: 1024 })],
      { group: name.startsWith("train") ? 0 : 1, params, fields, ...extra });
  const evil = "</script><img src=x onerror=alert(1)>";
  return {
    ...run(),
    groups: [{ name: "train", kind: "matrix", keys: ["lr", "seed"], position: 1 }, { name: "shard", kind: "array", keys: ["index"], position: 2 }],
    tasks: [
      task("prepare", "succeeded", [attempt({ end: 1_000 })]),
      element("train[lr=1e-2,seed=1]", "succeeded", ["lr", "1e-2", "seed", "1"], ["loss", 0.5, "acc", 0.8, "note", evil], 1_000, 3_000),
      element("train[lr=3e-3,seed=1]", "succeeded", ["lr", "3e-3", "seed", "1"], ["loss", 0.25, "acc", 0.9], 1_000, 4_000),
      element("train[lr=1e-3,seed=2]", "failed", ["lr", "1e-3", "seed", "2"], ["loss", 0.125, "acc", 0.95, evil, 1], 4_000, 4_500),
      element("train[lr=1e-4,seed=2]", "succeeded", ["lr", "1e-4", "seed", "2"], ["acc", 0.9], 4_500, 9_000),
      element("shard[9]", "succeeded", ["index", "9"], undefined, 10_000, 10_100),
      element("shard[10]", "succeeded", ["index", "10"], undefined, 10_000, 10_200),
      { name: "shard[11]", state: "waiting", group: 1, params: ["index", "11"] },
      task("report", "succeeded", [attempt({ start: 11_000, end: 12_000 })]),
    ],
  };
}

// The table's rows as { classes, cells } (cells' text, tags taken out).
function tableRows(page) {
  return page.element("table-rows").innerHTML.split('<div class="row').slice(1).map((row) => ({
    classes: row.slice(0, row.indexOf('"')).trim(),
    cells: [...row.slice(row.indexOf(">") + 1).matchAll(/<div[^>]*>(.*?)<\/div>/g)].map((cell) => text(cell[1])),
    markup: row,
  }));
}
function clickRow(page, selector, dataset) {
  page.element("table-rows").dispatch("click", { target: { closest: (wanted) => (wanted === selector ? { dataset } : null) } });
}
const openGroup = (page, group) => clickRow(page, "[data-group]", { group: String(group) });
const sortGroup = (page, group, column) => clickRow(page, "[data-gcolumn]", { of: String(group), gcolumn: String(column) });
// An opened group's elements as the values of its column `column`.
const columnOf = (page, column) => tableRows(page).filter((r) => r.classes === "element").map((r) => r.cells[column]);

test("a sweep's and an array's elements are one row each, closed, where the job file has them, with their counts", () => {
  const page = loadPage(sweepRun());
  page.runFrames();
  assert.equal(page.body.dataset.errors, undefined, page.element("errors").textContent);
  assert.equal(page.body.dataset.groups, "2");
  assert.equal(page.body.dataset.rendered, "9");
  const rows = tableRows(page);
  assert.deepEqual(rows.map((r) => r.classes), ["", "group", "group", ""]);
  assert.deepEqual(rows.map((r) => r.cells[0]), ["prepare", "▸train sweep", "▸shard array", "report"]);
  const train = rows[1].cells;
  assert.equal(train[1], "31", "a swatch and a count per outcome: 3 succeeded, 1 failed");
  assert.equal(train[2], "3 succeeded, 1 failed · 10.0 s run in all");
  assert.equal(train[3], "4", "attempts, all of them");
  assert.equal(train[4], "+1.00 s", "its first start");
  assert.equal(train[5], "8.00 s", "from its first start to its last end");
  assert.equal(train[8], "4 of 4 ended");
  assert.equal(rows[2].cells[2], "2 succeeded, 1 waiting · 300 ms run in all");
  assert.equal(rows[2].cells[8], "2 of 3 ended");
  assert.equal(page.element("shown").textContent, "9 tasks");
  assert.ok(page.element("facts").innerHTML.includes("<dt>sweeps</dt><dd>2 (7 elements)</dd>"));
});

test("an opened sweep compares its elements: a column per parameter key and per result key, a missing value blank", () => {
  const page = loadPage(sweepRun());
  openGroup(page, 0);
  const rows = tableRows(page);
  assert.deepEqual(rows.map((r) => r.classes), ["", "group open", "sweep-head", "element", "element", "element", "element", "group", ""]);
  assert.equal(rows[1].cells[0], "▾train sweep");
  // The last result key says "err" (in "onerror"): lowest is best.
  assert.deepEqual(rows[2].cells, ["lr", "seed", "loss ↓", "acc ↑", "note", "</script><img src=x onerror=alert(1)> ↓",
    "Outcome", "Attempts", "Duration", "Peak memory"]);
  assert.deepEqual(rows[3].cells, ["1e-2", "1", "0.5", "0.8", "</script><img src=x onerror=alert(1)>", "", "succeeded", "1", "2.00 s", " 1.0 KiB"]);   // the peak after its bar
  assert.deepEqual(rows[6].cells.slice(0, 6), ["1e-4", "2", "", "0.9", "", ""], "no loss, no note: blank");
  assert.ok(rows[3].markup.includes('title="train[lr=1e-2,seed=1]"'), "the element's name");
  // Numbers are right-aligned, texts not.
  assert.ok(/<div class="num[^"]*"[^>]*>0\.5</.test(rows[3].markup), rows[3].markup);
  assert.ok(/<div class=""[^>]*>&lt;\/script&gt;/.test(rows[3].markup), rows[3].markup);
  openGroup(page, 0);
  assert.deepEqual(tableRows(page).map((r) => r.classes), ["", "group", "group", ""], "closed again");
});

test("what a sweep's elements were given and reported is text, never markup", () => {
  const page = loadPage(sweepRun());
  openGroup(page, 0);
  const markup = page.element("table-rows").innerHTML;
  assert.ok(!markup.includes("<img") && !markup.includes("</script>"), markup);
  assert.ok(markup.includes("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"), markup);
});

test("a sweep's columns sort, numbers as numbers, a missing value last either way", () => {
  const page = loadPage(sweepRun());
  openGroup(page, 0);
  sortGroup(page, 0, 0);   // lr: 1e-2 is the largest, though not as text
  assert.deepEqual(columnOf(page, 0), ["1e-4", "1e-3", "3e-3", "1e-2"]);
  assert.ok(tableRows(page)[2].markup.includes('class="num sorted up"'), "the head says how it is sorted");
  sortGroup(page, 0, 0);
  assert.deepEqual(columnOf(page, 0), ["1e-2", "3e-3", "1e-3", "1e-4"]);
  sortGroup(page, 0, 2);   // loss
  assert.deepEqual(columnOf(page, 2), ["0.125", "0.25", "0.5", ""]);
  sortGroup(page, 0, 2);
  assert.deepEqual(columnOf(page, 2), ["0.5", "0.25", "0.125", ""]);
  sortGroup(page, 0, 4);   // note: a text
  assert.deepEqual(columnOf(page, 4), ["</script><img src=x onerror=alert(1)>", "", "", ""]);
  openGroup(page, 1);
  sortGroup(page, 1, 0);   // index: 9 before 10
  const shards = tableRows(page).filter((r) => r.classes === "element" && r.markup.includes("shard")).map((r) => r.cells[0]);
  assert.deepEqual(shards, ["9", "10", "11"]);
  sortGroup(page, 1, 1);   // outcome, in the legend's order
  assert.deepEqual(tableRows(page).filter((r) => r.markup.includes("shard[")).map((r) => r.cells[1]), ["succeeded", "succeeded", "waiting"]);
});

test("the best value of each numeric result is marked: lowest for a loss, highest else, among those that succeeded", () => {
  const page = loadPage(sweepRun());
  openGroup(page, 0);
  const best = (column) => tableRows(page).filter((r) => r.classes === "element")
    .filter((r) => [...r.markup.matchAll(/<div[^>]*>/g)][column][0].includes(" best")).map((r) => r.cells[0]);
  // The failed element's loss (0.125) and acc (0.95) are better, and not counted.
  assert.deepEqual(best(2), ["3e-3"], "loss: the lowest");
  assert.deepEqual(best(3), ["3e-3", "1e-4"], "acc: the highest, both of a tie");
  assert.deepEqual(best(4), [], "a text has no best");
  assert.deepEqual(best(5), ["1e-3"], "no element that succeeded has it: the best of all");
  assert.ok(tableRows(page)[2].markup.includes('title="lowest is best"'));
});

test("the filter and the outcome switches reach into groups; a group none of whose elements is shown is not", () => {
  const page = loadPage(sweepRun());
  openGroup(page, 0);
  page.filter("seed=2");
  assert.deepEqual(tableRows(page).map((r) => r.classes), ["group open", "sweep-head", "element", "element"]);
  assert.equal(page.element("shown").textContent, "showing 2 of 9");
  page.filter("");
  page.toggleOutcome("failed");
  assert.deepEqual(columnOf(page, 0), ["1e-2", "3e-3", "1e-4"]);
  page.toggleOutcome("succeeded");
  assert.deepEqual(tableRows(page).map((r) => r.cells[0]), ["▸shard array"], "train has nothing shown; shard its waiting element");
});

test("an element chosen says which sweep it belongs to", () => {
  const page = loadPage(sweepRun(), "#task=" + encodeURIComponent("train[lr=3e-3,seed=1]"));
  const card = page.element("detail-card").innerHTML;
  assert.ok(card.includes("<b>sweep</b> train"), card);
  assert.ok(card.includes('<h2 class="name">train[lr=3e-3,seed=1]</h2>'), card);
});

// Plain tasks that reported results (one with keys and values that are markup), a
// memory-max each, one above it that still succeeded, one diagnosed before its cancel; and
// the sweep of sweepRun, whose elements' results stay in its own table.
function resultsRun() {
  const evil = "</script><img src=x onerror=alert(1)>";
  const base = sweepRun();
  const MiB = 1024 * 1024;
  return {
    ...base,
    logs: "../logs/",
    tasks: [
      task("prepare", "succeeded", [attempt({ end: 1_000, peak: 770 * MiB, max: 700 * MiB })],
        { fields: ["note", "warm", "loss", 0.5, "acc", 0.75, evil, evil, "z", "last"] }),
      ...base.tasks.slice(1, 8),
      task("report", "succeeded", [attempt({ start: 11_000, end: 12_000, peak: 100 * MiB, max: 700 * MiB })],
        { fields: ["loss", 0.25, "acc", 0.5, "a", 1, "b", 2, "c", 3, "d", 4] }),
      task("stuck/1", "cancelled", [attempt({ start: 12_000, end: 15_000, outcome: "cancelled", exit: null, cancel: "timeout" })],
        { reason: "timeout", diagnosed: true, log: "stuck%2F1.log",
          diagnosis: "overtime: stuck/1: timeout due; diagnosing first (at most 10s): echo diag\n" + evil + "\novertime: stuck/1: the diagnose command exited 0 after 5ms" }),
      task("quiet", "cancelled", [attempt({ start: 12_000, end: 15_000, outcome: "cancelled", exit: null, cancel: "timeout" })],
        { reason: "timeout", diagnosed: true }),
    ],
  };
}

test("plain tasks' results are columns: numbers first, at most eight, blank on a sweep's row and where not reported", () => {
  const evil = "</script><img src=x onerror=alert(1)>";
  const page = loadPage(resultsRun());
  page.runFrames();
  assert.equal(page.body.dataset.errors, undefined, page.element("errors").textContent);
  const head = text(page.element("table-head").innerHTML.replace(/<\/div>/g, "|")).split("|").filter(Boolean);
  // The numeric keys in the order first reported, then the texts, cut at eight (z is left out).
  // The markup key says "err" (in "onerror"), but it holds text: no best, no arrow.
  assert.deepEqual(head.slice(9), ["loss ↓", "acc ↑", "a ↑", "b ↑", "c ↑", "d ↑", "note", evil]);
  const rows = tableRows(page);
  assert.deepEqual(rows.map((r) => r.cells[0]), ["prepare", "▸train sweep", "▸shard array", "report", "stuck/1", "quiet"]);
  assert.deepEqual(rows[0].cells.slice(9), ["0.5", "0.75", "", "", "", "", "warm", evil]);
  assert.deepEqual(rows[3].cells.slice(9), ["0.25", "0.5", "1", "2", "3", "4", "", ""]);
  assert.deepEqual(rows[1].cells.slice(9), ["", "", "", "", "", "", "", ""], "a sweep's row: its results are in its own table");
  // The best of those that succeeded is marked: the lowest loss, the highest accuracy.
  assert.ok(/class="num best"[^>]*>0\.25</.test(rows[3].markup), rows[3].markup);
  assert.ok(/class="num best"[^>]*>0\.75</.test(rows[0].markup), rows[0].markup);
  // Every row and the head are laid out with the result columns.
  assert.ok(rows.every((r) => r.markup.includes("grid-template-columns:") && r.markup.includes("minmax(76px,1fr)")));
  assert.ok(page.element("table-head").style.gridTemplateColumns.endsWith("minmax(76px,1fr)"));
});

test("a result column sorts, numbers as numbers, a task that did not report it last either way", () => {
  const page = loadPage(resultsRun());
  page.sortBy(9);   // loss
  assert.deepEqual(page.names(), ["report", "prepare", "▸train sweep", "▸shard array", "stuck/1", "quiet"]);
  page.sortBy(9);
  assert.deepEqual(page.names(), ["prepare", "report", "▸train sweep", "▸shard array", "stuck/1", "quiet"]);
});

test("result keys and values, and a diagnosis, are text, never markup", () => {
  const page = loadPage(resultsRun(), "#task=stuck%2F1");
  const all = page.element("table-head").innerHTML + page.element("table-rows").innerHTML + page.element("detail-card").innerHTML;
  assert.ok(!all.includes("<img") && !all.includes("</script>"), all);
  const card = page.element("detail-card").innerHTML;
  assert.ok(card.includes('<pre class="diagnosis">overtime: stuck/1: timeout due; diagnosing first (at most 10s): echo diag\n&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;\n'), card);
  const chosen = loadPage(resultsRun(), "#task=prepare");
  chosen.sortBy(9);
  const markup = chosen.element("table-rows").innerHTML + chosen.element("detail-card").innerHTML;
  assert.ok(!markup.includes("<img") && !markup.includes("</script>"), markup);
});

test("a peak is shown against its memory-max; one above it that succeeded says why", () => {
  const page = loadPage(resultsRun(), "#task=prepare");
  const rows = tableRows(page);
  assert.equal(rows[0].cells[7].trim(), "770 MiB of 700 MiB");
  assert.ok(/class="num over-max" title="770 MiB of 700 MiB max: above it"/.test(rows[0].markup), rows[0].markup);
  assert.equal(rows[3].cells[7].trim(), "100 MiB of 700 MiB");
  assert.ok(!rows[3].markup.includes("over-max"), "under its max: nothing to say");
  const card = page.element("detail-card").innerHTML;
  assert.ok(card.includes("<b>peak memory</b> 770 MiB of 700 MiB max"), card);
  assert.ok(card.includes('class="note over-max">Its peak memory is above its memory-max, and it succeeded'), card);
  assert.ok(card.includes("10 %, at least 32 MiB") && card.includes("docs/containment.md"), card);
  const under = loadPage(resultsRun(), "#task=report").element("detail-card").innerHTML;
  assert.ok(under.includes("<b>peak memory</b> 100 MiB of 700 MiB max") && !under.includes("over-max"), under);
});

test("a task's log is linked from where the page is; a diagnosed task's output is shown, or said to be in its log", () => {
  const page = loadPage(resultsRun(), "#task=stuck%2F1");
  const card = page.element("detail-card").innerHTML;
  // Its file name holds %2F (a / in its name): the link encodes the % again.
  assert.ok(card.includes('<b>log</b> <a href="../logs/stuck%252F1.log">logs/stuck%2F1.log</a>'), card);
  assert.ok(card.includes("<b>diagnose output</b>"), card);
  const quiet = loadPage(resultsRun(), "#task=quiet").element("detail-card").innerHTML;
  assert.ok(quiet.includes('<a href="../logs/quiet.log">logs/quiet.log</a>'), "a log named as its task: " + quiet);
  assert.ok(quiet.includes("<b>diagnose output</b> <span class=\"muted\">in its log"), quiet);
  const plain = loadPage(resultsRun(), "#task=report").element("detail-card").innerHTML;
  assert.ok(!plain.includes("diagnose output"), "no diagnosis, nothing said: " + plain);
  const waiting = loadPage(resultsRun(), "#task=" + encodeURIComponent("shard[11]")).element("detail-card").innerHTML;
  assert.ok(!waiting.includes("<b>log</b>"), "a task that never started has no log: " + waiting);
  const unlinked = loadPage({ ...resultsRun(), logs: null }, "#task=report").element("detail-card").innerHTML;
  assert.ok(!unlinked.includes("<b>log</b>"), unlinked);
});
