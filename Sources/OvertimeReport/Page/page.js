"use strict";
(function () {
const WORDS = { succeeded: "succeeded", failed: "failed", cancelled: "cancelled", killed: "killed",
  oom: "out of memory", skipped: "skipped", running: "running", waiting: "waiting" };
const ORDER = ["succeeded", "failed", "cancelled", "killed", "oom", "skipped", "running", "waiting"];
// A task an attempt of which was far slower than its peers (the journal's `straggler` line).
function stragglerTag(task) {
  return task.straggler ? ' <span class="straggler-tag" title="far slower than its peers in an attempt">straggler</span>' : "";
}
function offset(ms) { return "+" + duration(ms); }
function clock(ms) {
  const d = new Date(data.startedAt + ms);
  return d.toISOString().slice(11, 19) + " UTC";
}
function swatch(outcome) { return '<span class="swatch" style="background:' + COLORS[outcome] + '"></span>'; }
function outcomeCell(outcome) { return '<span class="outcome">' + swatch(outcome) + esc(WORDS[outcome] || outcome) + "</span>"; }

const data = JSON.parse(document.getElementById("run-data").textContent);
const tasks = data.tasks;
const runEnd = Math.max(data.end, 1);
const phaseNames = data.phases || [];

// Derived per task and attempt: where each bar ends (an open one at the journal's end),
// the task's span and its last progress.
let attemptCount = 0, retryCount = 0;
const skipped = [];
tasks.forEach(function (task, index) {
  // The data leaves out what holds its default (RunReportPage): put it back.
  if (task.outcome == null) task.outcome = task.state;
  if (!task.attempts) task.attempts = [];
  task.index = index;
  task.attemptCount = task.attempts.length;
  task.firstStart = task.attempts.length ? task.attempts[0].start : null;
  task.peak = null;
  task.overMax = false;
  if (!task.log) task.log = task.name + ".log";
  task.attempts.forEach(function (attempt, i) {
    ["lanes", "gpus", "marks", "progress", "phases", "stalls"].forEach(function (list) { if (!attempt[list]) attempt[list] = []; });
    // The memory-max beside the highest peak is the one that attempt ran under.
    if (attempt.peak != null && (task.peak == null || attempt.peak > task.peak)) { task.peak = attempt.peak; task.max = attempt.max; }
    if (attempt.peak != null && attempt.max != null && attempt.peak > attempt.max) task.overMax = true;
    // Its place among all the task's attempts: a resumed run numbers its own from 1.
    attempt.seq = i + 1;
    attempt.open = attempt.end == null;
    attempt.stop = attempt.open ? runEnd : attempt.end;
    attemptCount++;
    if (attempt.retry) retryCount++;
  });
  const last = task.attempts[task.attempts.length - 1];
  task.duration = last ? last.stop - last.start : null;
  task.lastFraction = null;
  for (let i = task.attempts.length - 1; i >= 0 && task.lastFraction == null; i--) {
    const p = task.attempts[i].progress;
    if (p.length) task.lastFraction = p[p.length - 1];
  }
  if (task.state === "skipped" && task.finished != null && !task.resumed) skipped.push(task);
  task.search = (task.name + " " + (task.reason || "") + " " + (task.detail || "") + " " + task.outcome).toLowerCase();
});

// ---- sweeps and arrays (groups.js): a row each, opening to a table comparing its elements ----
const anyMax = tasks.some(function (t) { return t.max != null; });
const shared = { ORDER: ORDER, WORDS: WORDS, esc: esc, swatch: swatch, outcomeCell: outcomeCell, stragglerTag: stragglerTag,
  duration: duration, offset: offset, peakCell: peakCell, peakWidth: anyMax ? "170px" : "110px", rowStart: rowStart,
  isSelected: function (t) { return t === selected; }, resultColumns: [] };
const sweeps = sweepsAndArrays(data, tasks, shared);
const groups = sweeps.groups;

// ---- header ----
document.getElementById("run-title").textContent = data.run || "(no run id)";
document.title = "Overtime run " + (data.run || "");
const status = document.getElementById("run-status");
if (data.complete && data.stoppedBy) { status.textContent = "stopped (" + data.stoppedBy + ")"; status.className = "status stopped"; }
else if (data.complete) { status.textContent = "finished"; status.className = "status done"; }
else { status.textContent = "no summary: running, or stopped before its end"; status.className = "status open"; }
const counts = {};
tasks.forEach(function (t) { counts[t.outcome] = (counts[t.outcome] || 0) + 1; });
const gpuLanes = data.lanes.filter(function (l) { return l.gpu != null; }).length;
const facts = [
  ["started", new Date(data.startedAt).toISOString().replace("T", " ").slice(0, 19) + " UTC"],
  ["elapsed", duration(data.end) + (data.complete ? "" : " so far")],
  ["tasks", String(tasks.length)],
  ["attempts", attemptCount + (retryCount ? " (" + retryCount + " retried)" : "")],
  ["lanes", (data.lanes.length - gpuLanes) + " slot" + (data.lanes.length - gpuLanes === 1 ? "" : "s") + (gpuLanes ? " + " + gpuLanes + " GPU" + (gpuLanes === 1 ? "" : "s") : "")],
];
if (groups.length) facts.push(["sweeps", groups.length + " (" + groups.reduce(function (n, g) { return n + g.elements.length; }, 0) + " elements)"]);
if (data.concurrency != null) facts.push(["concurrency", String(data.concurrency)]);
if (data.runs.length > 1) facts.push(["runs", data.runs.length + " (resumed in the same directory)"]);
facts.push(["journal", data.lines + " lines" + (data.unreadable ? ", " + data.unreadable + " unreadable" : "")]);
document.getElementById("facts").innerHTML = facts.map(function (f) { return "<div><dt>" + esc(f[0]) + "</dt><dd>" + esc(f[1]) + "</dd></div>"; }).join("");

const hidden = {};
const countsBox = document.getElementById("counts");
countsBox.innerHTML = ORDER.filter(function (o) { return counts[o]; }).map(function (o) {
  return '<span class="chip" data-outcome="' + o + '" title="show or hide ' + WORDS[o] + ' tasks in the table">' + swatch(o) + esc(WORDS[o]) + " <b>" + counts[o] + "</b></span>";
}).join("");
countsBox.addEventListener("click", function (event) {
  const chip = event.target.closest(".chip");
  if (!chip) return;
  const o = chip.dataset.outcome;
  hidden[o] = !hidden[o];
  chip.classList.toggle("off", hidden[o]);
  applyFilter();
});

document.getElementById("legend").innerHTML = ORDER.filter(function (o) { return o !== "waiting"; }).map(function (o) {
  return "<span>" + (o === "running" ? '<span class="swatch stripe-key"></span>' : swatch(o)) + esc(WORDS[o]) + "</span>";
}).join("") + '<span><span class="swatch progress-key"></span>progress, inside a bar</span><span><span class="mark-key"></span>cancel (its reason beside it)</span><span><span class="retry-key"></span>retried as the next attempt</span>'
  + (tasks.some(function (t) { return t.attempts.some(function (a) { return a.stalls.length; }); }) ? '<span><span class="swatch stall-key"></span>stalled</span>' : "")
  + phaseNames.map(function (name, i) { return '<span class="phase-key"><span class="swatch" style="background:' + phaseColor(i) + '"></span>phase ' + esc(name) + "</span>"; }).join("");

// ---- the timeline ----
const laneBars = data.lanes.map(function () { return []; });
tasks.forEach(function (task) {
  task.attempts.forEach(function (attempt) {
    attempt.lanes.forEach(function (lane) { if (laneBars[lane]) laneBars[lane].push({ task: task, attempt: attempt }); });
  });
});
// Bars of one lane never overlap, so sorting by start sorts their ends too.
laneBars.forEach(function (bars) { bars.sort(function (a, b) { return a.attempt.start - b.attempt.start; }); });
skipped.sort(function (a, b) { return a.finished - b.finished; });

let selected = null;
const timeline = timelineView({
  canvas: document.getElementById("timeline"), scroller: document.getElementById("timeline-scroll"),
  spacer: document.getElementById("timeline-spacer"), tooltip: document.getElementById("tooltip"),
  zoomIn: document.getElementById("zoom-in"), zoomOut: document.getElementById("zoom-out"), zoomFit: document.getElementById("zoom-fit"),
}, {
  lanes: data.lanes, bars: laneBars, skipped: skipped, tasks: tasks,
  resumes: data.runs.slice(1).map(function (run) { return run.start; }),
  end: runEnd, open: !data.complete, endLabel: "last journal line", follow: false, axisLabel: "time since start",
}, {
  label: function (bar) { return bar.task.name + (bar.task.attempts.length > 1 ? "  #" + bar.attempt.seq : ""); },
  describe: function (box, task, attempt, t) { box.innerHTML = describe(task, attempt, t); },
  select: function (task) { select(task); },
  selected: function () { return selected; },
});
const canvas = document.getElementById("timeline");
const requestDraw = timeline.requestDraw;

function moreMarks(attempt) {
  return attempt.moreMarks + " more mark" + (attempt.moreMarks === 1 ? "" : "s") + " in the journal";
}

function describe(task, attempt, t) {
  const lines = ["<b>" + esc(task.name) + "</b>" + (attempt ? " <span class='muted'>attempt " + attempt.seq + " of " + task.attempts.length + (attempt.n !== attempt.seq ? " (its run's " + attempt.n + ")" : "") + "</span>" : "")];
  if (attempt) {
    lines.push(outcomeCell(attempt.outcome) + (attempt.as && attempt.as !== attempt.outcome ? " (" + esc(attempt.as) + ")" : "") + (attempt.cancel ? " · cancel: " + esc(attempt.cancel) + (attempt.why ? " (" + esc(attempt.why) + ")" : "") : "") + (attempt.exit != null ? " · exit " + attempt.exit : ""));
    lines.push(offset(attempt.start) + " (" + clock(attempt.start) + ") · " + (attempt.open ? "running for " : "ran ") + duration(attempt.stop - attempt.start));
    if (attempt.gpus.length) lines.push("GPU " + attempt.gpus.map(esc).join(", "));
    const p = attempt.progress;
    if (p.length || attempt.title || attempt.detail) {
      lines.push("progress " + (p.length ? Math.round(p[p.length - 1] * 100) + "%" : "–") + (attempt.reporter ? " · " + esc(attempt.reporter) : "") + (attempt.title ? " · " + esc(attempt.title) : "") + (attempt.detail ? " · " + esc(attempt.detail) : ""));
    }
    const phase = t != null ? phaseAt(attempt, t, phaseNames) : null;
    if (phase) lines.push("phase <b>" + esc(phase[0]) + "</b> from " + offset(phase[1]) + " for " + duration(phase[2] - phase[1]));
    // The entry that marks where the phases left out begin is one of them.
    const named = attempt.phases.length / 2 + (attempt.morePhases ? attempt.morePhases - 1 : 0);
    if (named > 1) lines.push(named + " phases named" + (attempt.morePhases ? " (" + attempt.morePhases + " not drawn)" : ""));
    for (let i = 0; i < attempt.stalls.length; i += 2) {
      lines.push("stalled at " + offset(attempt.stalls[i]) + (attempt.stalls[i + 1] == null ? ", did not resume" : ", resumed after " + duration(attempt.stalls[i + 1] - attempt.stalls[i])));
    }
    if (attempt.peak != null) lines.push("peak memory " + bytes(attempt.peak) + (attempt.source ? " (" + esc(attempt.source) + ")" : ""));
    attempt.marks.forEach(function (m) { lines.push(esc(m[1]) + " at " + offset(m[0]) + ": " + esc(m[2])); });
    if (attempt.moreMarks) lines.push(moreMarks(attempt));
    if (attempt.retry) lines.push("retried, because: " + esc(attempt.retry));
  } else {
    lines.push(outcomeCell(task.outcome) + (task.reason ? " · " + esc(task.reason) : "") + " at " + offset(task.finished));
    if (task.detail) lines.push(esc(task.detail));
  }
  if (attempt && attempt === task.attempts[task.attempts.length - 1] && task.state !== "running") {
    lines.push("task: " + outcomeCell(task.outcome) + (task.reason ? " · " + esc(task.reason) : "") + (task.detail ? " · " + esc(task.detail) : ""));
  }
  return lines.map(function (l) { return "<div class='line'>" + l + "</div>"; }).join("");
}

document.addEventListener("keydown", function (event) { if (event.key === "Escape" && selected) select(null); });
window.addEventListener("resize", function () { requestDraw(); renderRows(); });

// ---- one task, chosen ----
const detailCard = document.getElementById("detail-card");
function select(task) {
  selected = task;
  requestDraw();
  renderRows();
  // The address names the task chosen, so a link can open the page on it.
  if (history.replaceState) history.replaceState(null, "", task ? "#task=" + encodeURIComponent(task.name) : location.pathname);
  if (!task) { detailCard.hidden = true; return; }
  const kv = [["outcome", outcomeCell(task.outcome)]];
  if (task.group != null) kv.push([groups[task.group].kind === "array" ? "array" : "sweep", esc(groups[task.group].name)]);
  if (task.reason) kv.push(["reason", esc(task.reason)]);
  if (task.detail) kv.push(["detail", esc(task.detail)]);
  if (task.exit != null) kv.push(["exit", String(task.exit)]);
  kv.push(["attempts", String(task.attempts.length)]);
  if (task.peak != null) kv.push(["peak memory", esc(peakText(task.peak, task.max))]);
  if (task.attempts.length && data.logs != null) kv.push(["log", '<a href="' + esc(data.logs + encodeURIComponent(task.log)) + '">logs/' + esc(task.log) + "</a>"]);
  if (task.resumed) kv.push(["resumed", "succeeded in the run this one resumed"]);
  if (task.straggler) kv.push(["straggler", "an attempt was far slower than its peers (its marks say when)"]);
  let html = '<div class="card-head"><h2 class="name">' + esc(task.name) + '</h2><button class="close" id="detail-close">close</button></div><div class="detail-grid">';
  html += '<div class="kv">' + kv.map(function (p) { return "<span><b>" + p[0] + "</b> " + p[1] + "</span>"; }).join("") + "</div>";
  if (task.attempts.length) {
    html += '<table class="attempts"><tr><th>#</th><th>lane</th><th>start</th><th>ran</th><th>outcome</th><th>exit</th><th>marks</th><th>peak memory</th><th>retried because</th></tr>';
    task.attempts.forEach(function (a) {
      html += "<tr><td>" + a.seq + "</td><td>" + esc(a.lanes.map(function (l) { return data.lanes[l] ? data.lanes[l].label : "?"; }).join(", ")) + "</td><td>" + offset(a.start) + "</td><td>" + duration(a.stop - a.start) + (a.open ? " (open)" : "") + "</td><td>" + outcomeCell(a.outcome) + (a.cancel ? " · " + esc(a.cancel) : "") + "</td><td>" + (a.exit != null ? a.exit : "–") + "</td><td>" + (a.marks.map(function (m) { return esc(m[2]) + " at " + offset(m[0]); }).concat(a.moreMarks ? [moreMarks(a)] : []).join("; ") || "–") + "</td><td>" + esc(peakText(a.peak, a.max)) + "</td><td>" + esc(a.retry || "–") + "</td></tr>";
    });
    html += "</table>";
    html += '<canvas id="progress-chart"></canvas>';
  }
  if (task.overMax) html += '<div class="note over-max">' + OVER_MAX_NOTE[task.outcome === "succeeded" ? 0 : 1] + "</div>";
  if (task.result) html += '<div><b>result</b><code class="result">' + esc(task.result) + "</code></div>";
  if (task.diagnosis != null) html += '<div><b>diagnose output</b> <span class="muted">its last, from its log</span><pre class="diagnosis">' + esc(task.diagnosis) + "</pre></div>";
  else if (task.diagnosed) html += '<div><b>diagnose output</b> <span class="muted">in its log (not found in its last 4 MiB, or past what the page holds of diagnoses)</span></div>';
  html += "</div>";
  detailCard.innerHTML = html;
  detailCard.hidden = false;
  document.getElementById("detail-close").onclick = function () { select(null); };
  if (task.attempts.length) drawProgressChart(task, document.getElementById("progress-chart"));
}

function drawProgressChart(task, chart) {
  const dpr = window.devicePixelRatio || 1;
  const w = chart.clientWidth, h = chart.clientHeight;
  chart.width = Math.round(w * dpr); chart.height = Math.round(h * dpr);
  const c = chart.getContext("2d");
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  const left = 44, right = 12, topPad = 10, bottom = 34;
  const t0 = task.attempts[0].start, t1 = Math.max(t0 + 1, task.attempts[task.attempts.length - 1].stop);
  const x = function (t) { return left + (t - t0) / (t1 - t0) * (w - left - right); };
  const y = function (f) { return topPad + (1 - f) * (h - topPad - bottom); };
  c.font = "11px system-ui, 'DejaVu Sans', sans-serif"; c.textBaseline = "middle"; c.fillStyle = "#6b7280"; c.strokeStyle = "#e5e7eb";
  [0, 0.5, 1].forEach(function (f) { c.beginPath(); c.moveTo(left, Math.round(y(f)) + 0.5); c.lineTo(w - right, Math.round(y(f)) + 0.5); c.stroke(); c.fillText(Math.round(f * 100) + "%", 8, y(f)); });
  const step = tickStep(t1 - t0, (w - left - right) / 90);
  c.textAlign = "center";
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) c.fillText(tickLabel(t, step), x(t), h - 10);
  c.textAlign = "left";
  task.attempts.forEach(function (a) {
    c.fillStyle = a.open ? COLORS.running : COLORS[a.outcome];
    c.fillRect(Math.floor(x(a.start)), h - bottom + 4, Math.max(2, Math.round(x(a.stop) - x(a.start))), 6);
    const p = a.progress;
    if (p.length) {
      c.beginPath();
      for (let i = 0; i < p.length; i += 2) { if (i === 0) c.moveTo(x(p[i]), y(p[i + 1])); else c.lineTo(x(p[i]), y(p[i + 1])); }
      c.strokeStyle = a.open ? COLORS.running : COLORS[a.outcome]; c.lineWidth = 2; c.stroke();
      for (let i = 0; i < p.length; i += 2) { c.fillStyle = c.strokeStyle; c.fillRect(x(p[i]) - 1.5, y(p[i + 1]) - 1.5, 3, 3); }
    }
    a.marks.forEach(function (m) {
      c.fillStyle = MARK_COLORS[m[1]] || "#111827";
      c.fillRect(Math.round(x(m[0])) - 1, topPad, 2, h - topPad - bottom + 10);
      c.font = "bold 11px system-ui, 'DejaVu Sans', sans-serif";
      c.fillText(m[2], Math.round(x(m[0])) + 5, topPad + 8);
      c.font = "11px system-ui, 'DejaVu Sans', sans-serif";
    });
  });
  if (!task.attempts.some(function (a) { return a.progress.length; })) {
    c.fillStyle = "#6b7280"; c.textAlign = "center";
    c.fillText("no progress was reported", (left + w - right) / 2, (topPad + h - bottom) / 2);
    c.textAlign = "left";
  }
}

// ---- the table, only its rows in view ----
// One list of rows, each ROW high, so only those in view are built however many there are:
// the tasks that are no element, a row for each sweep or array (at the job file's place),
// and under an opened one the head of the table that compares its elements, and them.
const ROW = 30;
const columns = [
  { label: "Task", key: function (t) { return t.name; } },
  { label: "Outcome", key: function (t) { return ORDER.indexOf(t.outcome); } },
  { label: "Reason", key: function (t) { return (t.reason || "") + (t.detail || ""); } },
  { label: "Attempts", key: function (t) { return t.attemptCount; }, num: true },
  { label: "Start", key: function (t) { return t.firstStart == null ? Infinity : t.firstStart; }, num: true },
  { label: "Duration", key: function (t) { return t.duration == null ? -1 : t.duration; }, num: true },
  { label: "Exit", key: function (t) { return t.exit == null ? -1 : t.exit; }, num: true },
  { label: "Peak memory", key: function (t) { return t.peak == null ? -1 : t.peak; }, num: true },
  { label: "Progress", key: function (t) { return t.lastFraction == null ? -1 : t.lastFraction; } },
];
// A column per result key of the tasks that are no element, blank on a sweep's row.
const resultColumns = shared.resultColumns = sweeps.taskResultColumns(tasks.filter(function (t) { return t.group == null; }));
resultColumns.forEach(function (c) {
  columns.push({ label: c.label + (c.best == null ? "" : c.lower ? " ↓" : " ↑"), num: c.num,
    key: function (t) { return t.elements ? null : c.value(t); } });
});
// The table's columns as page.css lays them out, wider where they hold more.
const tableTemplate = "minmax(160px,2fr) 120px minmax(140px,2fr) 70px 80px 86px 52px " + shared.peakWidth + " 150px" +
  resultColumns.map(function (c) { return " " + c.width; }).join("");
const head = document.getElementById("table-head");
head.innerHTML = columns.map(function (c, i) { return '<div data-column="' + i + '"' + (c.num ? ' class="num"' : "") + ">" + esc(c.label) + "</div>"; }).join("");
head.style.gridTemplateColumns = tableTemplate;
if (resultColumns.length) {
  // Too wide for the card: the table scrolls sideways, its head with it.
  const wide = 1100 + resultColumns.length * 86 + "px";
  head.style.minWidth = wide;
  document.getElementById("table-body").style.minWidth = wide;
}
let sortColumn = -1, sortUp = true;
head.addEventListener("click", function (event) {
  const cell = event.target.closest("[data-column]");
  if (!cell) return;
  const i = Number(cell.dataset.column);
  if (sortColumn === i) sortUp = !sortUp; else { sortColumn = i; sortUp = true; }
  head.querySelectorAll("[data-column]").forEach(function (c) { c.classList.remove("sorted", "up"); });
  cell.classList.add("sorted"); if (sortUp) cell.classList.add("up");
  applyFilter();
});
const body = document.getElementById("table-body");
const rowsBox = document.getElementById("table-rows");
const filterInput = document.getElementById("filter");
let items = [];
body.style.height = Math.min(Math.max(tasks.length, 1), 14) * ROW + 2 + "px";
function applyFilter() {
  const words = filterInput.value.trim().toLowerCase();
  const passes = function (t) { return !hidden[t.outcome] && (!words || t.search.indexOf(words) >= 0); };
  const top = tasks.filter(function (t) { return t.group == null && passes(t); });
  let count = top.length;
  groups.forEach(function (g) {
    g.shown = g.elements.filter(passes);
    count += g.shown.length;
    // One the journal has no element of yet stands for itself.
    if (g.shown.length || (!g.elements.length && passes(g))) top.push(g);
  });
  const key = sortColumn >= 0 ? columns[sortColumn].key : null, sign = sortUp ? 1 : -1;
  top.sort(function (a, b) {
    if (!key) return a.rank - b.rank;
    const x = key(a), y = key(b);
    // A result a task did not report sorts last either way.
    if (x == null || y == null) return x == null && y == null ? a.rank - b.rank : x == null ? 1 : -1;
    return (x < y ? -1 : x > y ? 1 : a.rank - b.rank) * sign;
  });
  items = [];
  top.forEach(function (entry) {
    items.push(entry);
    if (entry.elements && entry.open) {
      items.push({ head: entry });
      sweeps.sortedElements(entry).forEach(function (t) { items.push(t); });
    }
  });
  rowsBox.style.height = items.length * ROW + "px";
  document.getElementById("shown").textContent = count === tasks.length ? tasks.length + " tasks" : "showing " + count + " of " + tasks.length;
  renderRows();
}
filterInput.addEventListener("input", applyFilter);

function sparkline(task) {
  const w = 96, h = 16;
  const points = [];
  const t0 = task.firstStart, t1 = task.attempts.length ? task.attempts[task.attempts.length - 1].stop : null;
  if (t0 == null) return '<span class="muted">–</span>';
  const span = Math.max(1, t1 - t0);
  task.attempts.forEach(function (a) {
    for (let i = 0; i < a.progress.length; i += 2) points.push(((a.progress[i] - t0) / span * w).toFixed(1) + "," + ((1 - a.progress[i + 1]) * (h - 2) + 1).toFixed(1));
  });
  const color = COLORS[task.outcome] || COLORS.running;
  const percent = task.lastFraction == null ? "" : Math.round(task.lastFraction * 100) + "%";
  if (!points.length) return '<span class="muted">no progress</span>';
  return '<span class="spark"><svg width="' + w + '" height="' + h + '" viewBox="0 0 ' + w + " " + h + '"><polyline fill="none" stroke="' + color + '" stroke-width="1.5" points="' + points.join(" ") + '"/></svg>' + percent + "</span>";
}

let maxPeak = 0;
tasks.forEach(function (t) { if (t.peak != null && t.peak > maxPeak) maxPeak = t.peak; });
// A peak with the memory-max it ran under: `770 MiB of 700 MiB max`.
function peakText(peak, max) { return bytes(peak) + (peak != null && max != null ? " of " + bytes(max) + " max" : ""); }
// A peak above the max is no contradiction: say why, where the task is shown.
const OVER_MAX_NOTE = [
  "Its peak memory is above its memory-max, and it succeeded: the peak counts all the memory its cgroup was charged, file cache included, while the watchdog cancels on the working set (usage less inactive file cache), sampled four times a second; and the kernel's hard limit sits a margin (10 %, at least 32 MiB) above memory-max, so a burst between two samples runs on (docs/containment.md).",
  "Its peak memory is above its memory-max: the watchdog samples four times a second, and the kernel's hard limit sits a margin (10 %, at least 32 MiB) above memory-max, so a burst runs past the max before the cancel or the kernel stops it (docs/containment.md).",
];
// `task` gives the max beside the peak (a group's row has none).
function peakCell(peak, task) {
  const max = task ? task.max : null, over = task && task.overMax;
  return '<div class="num' + (over ? " over-max" : "") + '"' + (max != null ? ' title="' + esc(peakText(peak, max)) + (over ? ": above it" : "") + '"' : "") + ">" +
    (peak == null ? "–" : '<span class="membar" style="width:' + Math.max(2, Math.round(peak / maxPeak * 36)) + 'px"></span> ' + bytes(peak) +
      (max != null ? ' <span class="muted">of ' + bytes(max) + "</span>" : "")) + "</div>";
}
// A row at place `i`, laid out by `template` (a sweep's comparison), else as the task table.
function rowStart(classes, i, template) {
  return '<div class="row' + classes + '" style="top:' + i * ROW + "px;grid-template-columns:" + (template || tableTemplate) + '"';
}
function row(task, i) {
  const cells = [
    '<div class="name" title="' + esc(task.name) + '">' + esc(task.name) + "</div>",
    "<div>" + outcomeCell(task.outcome) + stragglerTag(task) + "</div>",
    '<div title="' + esc(task.detail || "") + '">' + esc(task.reason || "") + (task.detail ? ' <span class="muted">' + esc(task.detail) + "</span>" : "") + "</div>",
    '<div class="num">' + task.attempts.length + "</div>",
    '<div class="num">' + (task.firstStart == null ? "–" : offset(task.firstStart)) + "</div>",
    '<div class="num">' + duration(task.duration) + "</div>",
    '<div class="num">' + (task.exit == null ? "–" : task.exit) + "</div>",
    peakCell(task.peak, task),
    "<div>" + sparkline(task) + "</div>",
  ].concat(resultColumns.map(function (c) { return c.cell(task); }));
  return rowStart(task === selected ? " selected" : "", i) + ' data-task="' + task.index + '">' + cells.join("") + "</div>";
}
let rowsPending = false;
function renderRows() {
  rowsPending = false;
  const first = Math.max(0, Math.floor(body.scrollTop / ROW) - 6);
  const count = Math.ceil(body.clientHeight / ROW) + 12;
  let html = "";
  for (let i = first; i < Math.min(items.length, first + count); i++) {
    const item = items[i];
    html += item.head ? sweeps.headRow(item.head, i) : item.elements ? sweeps.groupRow(item, i) : item.group != null ? sweeps.elementRow(item, i) : row(item, i);
  }
  rowsBox.innerHTML = html;
}
body.addEventListener("scroll", function () { if (!rowsPending) { rowsPending = true; requestAnimationFrame(renderRows); } });
rowsBox.addEventListener("click", function (event) {
  if (sweeps.openOrSort(event.target)) { applyFilter(); return; }
  const r = event.target.closest("[data-task]");
  if (r) select(tasks[Number(r.dataset.task)]);
});

// ---- memory ----
const byPeak = tasks.filter(function (t) { return t.peak != null; }).sort(function (a, b) { return b.peak - a.peak; });
const memoryBox = document.getElementById("memory");
if (!byPeak.length) {
  memoryBox.innerHTML = '<span class="muted">The journal holds no memory peaks (nothing measured them: no cgroup, or no task ended yet).</span>';
} else {
  document.getElementById("memory-hint").textContent = byPeak.length > 12 ? "the 12 highest of " + byPeak.length : "";
  memoryBox.innerHTML = byPeak.slice(0, 12).map(function (t) {
    return '<div class="name" title="' + esc(t.name) + '">' + esc(t.name) + '</div><div><div class="bar" style="width:' + Math.max(0.5, t.peak / byPeak[0].peak * 100).toFixed(1) + '%"></div></div><div class="num">' + bytes(t.peak) + "</div>";
  }).join("");
}

document.getElementById("footer").textContent = "Made by overtime report from events.jsonl" + (data.complete ? " and summary.json" : "") + ". Every time is relative to the journal's earliest line; bars end at each attempt's exited line" + (data.complete ? "." : ", or at the last journal line for those still open.");

applyFilter();
timeline.draw();
if (location.hash.indexOf("#task=") === 0) {
  // A hand-edited link (#task=%E0) must not stop the page: such a name is taken as written.
  let wanted = location.hash.slice(6);
  try { wanted = decodeURIComponent(wanted); } catch (e) {}
  const task = tasks.find(function (t) { return t.name === wanted; });
  if (task) { select(task); timeline.draw(); }
}
const rect = canvas.getBoundingClientRect();
document.body.dataset.timeline = [Math.round(rect.left + window.scrollX), Math.round(rect.top + window.scrollY), Math.round(rect.width), Math.round(rect.height)].join(",");
document.body.dataset.lanes = String(timeline.laneCount());
document.body.dataset.groups = String(groups.length);
document.body.dataset.renderMs = performance.now().toFixed(0);
document.body.dataset.rendered = String(tasks.length);
})();
