"use strict";
(function () {
// The live page: /api/status once, then /api/events applied as they come. Every event only
// marks its task's row changed; one animation frame writes the rows in view that changed,
// each cell only when its text differs, so a flood of progress costs a frame's work at most.
// Task text reaches the page only through textContent, with bidi controls made visible.

// The states of `ctl status` and of an `exited` event's outcome, as colours of the report's.
const STATE_COLOR = { running: COLORS.running, starting: COLORS.running, exiting: COLORS.running, cancelling: COLORS.cancelled,
  retrying: COLORS.waiting, waiting: COLORS.waiting, succeeded: COLORS.succeeded, failed: COLORS.failed, skipped: COLORS.skipped,
  cancelled: COLORS.cancelled, killed: COLORS.killed, oom: COLORS.oom, timeout: COLORS.cancelled };
const LIVE_STATES = { running: true, starting: true, exiting: true, cancelling: true };
function ended(state) { return !LIVE_STATES[state] && state !== "waiting" && state !== "retrying"; }
const STATE_ORDER = ["running", "starting", "cancelling", "exiting", "retrying", "waiting", "succeeded", "failed", "cancelled", "killed", "oom", "skipped"];

// Writes to the DOM only what changed: a row's cells are set every frame it is dirty.
function setText(element, text) { if (element.shownText !== text) { element.shownText = text; element.textContent = text; } }
function setTitle(element, text) { if (element.title !== text) element.title = text; }
function setStyle(element, name, value) {
  const key = "shown-" + name;
  if (element[key] !== value) { element[key] = value; element.style[name] = value; }
}

// Durations as the CLI takes them: 90, 30s, 1.5s, 5m, 2h, 1h30m; seconds, or null.
function parseDuration(text) {
  const value = String(text).trim();
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value);
  const parts = value.match(/^(\d+(?:\.\d+)?(?:ms|s|m|h))+$/) ? value.match(/\d+(?:\.\d+)?(?:ms|s|m|h)/g) : null;
  if (!parts) return null;
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600 };
  const seconds = parts.reduce(function (sum, part) { const m = part.match(/^([\d.]+)(ms|s|m|h)$/); return sum + Number(m[1]) * unit[m[2]]; }, 0);
  return seconds > 0 ? seconds : null;
}

// ---- the model: what status said, moved on by each event ----
const tasks = new Map();
const groups = new Map();
const entries = [];        // the table's top level in arrival order: tasks that are no element, and groups
const dirty = new Set();   // tasks and groups whose rows must be written at the next frame
let layoutDirty = true;    // the list of rows itself changed (a new task, a group opened, the filter)
let countsDirty = true;
let selected = null;
let detailDirty = false;

function newTask(name) {
  const task = { name: name, state: "waiting", attempts: null, pid: null, remaining: null, remainingAt: 0, progress: null,
    memory: null, peak: null, memoryMax: null, hardLimit: null, hardLimitAt: 0, lastEvent: 0, stateEvent: 0, phase: null, window: null, stalled: false, straggler: false, reasons: [],
    cancelSeen: false, reason: null, note: "", noteFailed: false, samples: [], events: [], eventsDropped: 0, group: null };
  tasks.set(name, task);
  entries.push(task);
  layoutDirty = countsDirty = true;
  return task;
}
function taskNamed(name) { return tasks.get(name) || newTask(name); }
function groupNamed(name) {
  let group = groups.get(name);
  if (!group) {
    group = { name: name, isGroup: true, elements: [], folded: {}, open: false, reason: null };
    groups.set(name, group);
    entries.push(group);
    layoutDirty = true;
  }
  return group;
}
// An element of a sweep or array belongs to its group's row, not the top level.
function joinGroup(task, name) {
  if (task.group || !name) return;
  const group = groupNamed(name);
  task.group = group;
  group.elements.push(task);
  const at = entries.indexOf(task);
  if (at >= 0) entries.splice(at, 1);
  layoutDirty = true;
}
function touch(task) {
  dirty.add(task);
  if (task.group) dirty.add(task.group);
  if (task === selected) detailDirty = true;
  requestFrame();
}
function addReason(task, reason, why) {
  if (!reason) return;
  const text = why ? reason + " (" + why + ")" : reason;
  if (task.reasons[task.reasons.length - 1] !== text) task.reasons.push(text);
}
function setRemaining(task, seconds, at) {
  if (seconds === undefined) return;
  task.remaining = seconds;
  task.remainingAt = at;
}
// What a progress message said, and a sample for the rate: [ms, completed, fraction].
function setProgress(task, progress, at) {
  task.progress = progress;
  const fraction = progress.fraction != null ? progress.fraction : progress.total ? progress.completed / progress.total : null;
  if (progress.completed == null && fraction == null) return;
  const last = task.samples[task.samples.length - 1];
  // A bar that restarts lower (a new epoch) starts the rate anew.
  if (last && (progress.completed != null ? progress.completed < last[1] : fraction < last[2])) task.samples = [];
  task.samples.push([at, progress.completed, fraction]);
  if (task.samples.length > 600) task.samples.splice(0, task.samples.length - 600);
}

// `asked`: how many events had come when the status was asked for; a task's event that came
// after is newer than what the status says of that task, which then gives only its figures.
function applyStatus(reply, asked) {
  const at = performance.now(), wall = Date.now();
  timeline.begin(reply, wall);
  (reply.tasks || []).forEach(function (s) {
    if (s == null || typeof s.name !== "string") return;
    if (s.elements) {
      // A sweep too large to list: its row counts the elements not listed.
      const group = groupNamed(s.name);
      group.folded = s.elements;
      group.reason = s.reason || null;
      dirty.add(group);
      return;
    }
    const task = taskNamed(s.name);
    joinGroup(task, s.sweep);
    const live = s.live || s;
    if (live.memory != null) task.memory = live.memory;
    if (live.peak_memory != null) task.peak = live.peak_memory;
    if (live.memory_max != null) task.memoryMax = live.memory_max;
    task.hardLimit = live.max_runtime_remaining != null ? live.max_runtime_remaining : null;
    task.hardLimitAt = at;
    // An event that came during the read is newer than the status: a state it set stays
    // (with its pid and attempts), and so do the figures it moved. A task the page first
    // heard of by such an event (its progress, say) takes its state from the status.
    if (task.stateEvent <= asked) {
      // Status says `failed` of any attempt that ended; the exited line's outcome (cancelled,
      // killed, oom) says more, and stays.
      const state = ended(task.state) && ended(s.state) ? task.state : s.state;
      if (task.state !== state) countsDirty = true;
      task.state = state;
      if (s.attempts != null) task.attempts = s.attempts;
      task.pid = live.pid != null ? live.pid : null;
      timeline.status(task, s, wall);
    }
    if (task.lastEvent > asked) { touch(task); return; }
    setRemaining(task, live.remaining === undefined ? null : live.remaining, at);
    if (live.progress) setProgress(task, live.progress, wall);
    task.phase = live.phase || null;
    task.window = live.window != null ? live.window : null;
    task.stalled = live.stalled != null && live.stalled !== false;
    if (s.cancel_reason) { addReason(task, s.cancel_reason); task.cancelSeen = true; }
    if (s.reason) task.reason = s.reason;
    touch(task);
  });
  timeline.touch();
  layoutDirty = countsDirty = true;
  requestFrame();
}

function eventText(event) {
  const rest = {};
  Object.keys(event).forEach(function (key) { if (key !== "time" && key !== "run" && key !== "task" && key !== "event") rest[key] = event[key]; });
  const fields = JSON.stringify(rest);
  return (event.time ? String(event.time).slice(11, 23) + " " : "") + event.event + (fields === "{}" ? "" : " " + fields);
}

let eventsSeen = 0;
function applyEvent(event) {
  if (event == null || typeof event.task !== "string" || typeof event.event !== "string") return;
  const task = taskNamed(event.task);
  joinGroup(task, event.sweep);
  const at = performance.now();
  const wall = typeof event.time === "string" && isFinite(Date.parse(event.time)) ? Date.parse(event.time) : Date.now();
  task.lastEvent = ++eventsSeen;
  // Kept as it came; written as text only when a card shows it.
  task.events.push(event);
  if (task.events.length > 500) { task.events.shift(); task.eventsDropped++; }
  const state = task.state;
  timeline.event(task, event, Date.now());
  switch (event.event) {
  case "started":
    task.state = "running"; task.pid = event.pid != null ? event.pid : null;
    task.attempts = (task.attempts || 0) + 1; task.samples = []; task.stalled = false; task.cancelSeen = false;
    task.hardLimit = null;   // this attempt's, in the next status
    break;
  case "progress":
    setProgress(task, event, wall); setRemaining(task, event.remaining, at);
    if (task.stalled) task.stalled = false;
    break;
  case "heartbeat": case "expiring": setRemaining(task, event.remaining, at); break;
  case "budget":
    setRemaining(task, event.remaining, at);
    if (event.cause === "operator-extend") setNote(task, "extended: " + left(event.remaining));
    else if (event.cause === "revoke") setNote(task, "revoked: " + left(event.remaining));
    break;
  case "cancel":
    task.state = "cancelling"; addReason(task, event.reason, event.why); task.cancelSeen = true;
    if (event.reason === "user") setNote(task, "cancelling (user)");
    break;
  case "kill": setNote(task, "killed with " + (event.signal || "SIGKILL") + " after its grace"); break;
  case "exited":
    task.state = event.outcome || (event.exit_code === 0 ? "succeeded" : "failed");
    if (task.note === "cancelling (user)") setNote(task, "cancelled (user)");
    task.pid = null; task.remaining = null;
    // Its last progress, which the journal's one line a second may have left out.
    if (event.progress && typeof event.progress === "object") setProgress(task, event.progress, wall);
    // The attempt's cancel event said its reason already; one without it (a thinned or
    // missed line) is said here.
    if (!task.cancelSeen) addReason(task, event.cancel_reason, event.cancel_why);
    if (event.peak_memory != null) task.peak = event.peak_memory;
    break;
  case "phase": task.phase = event.name || null; task.window = event.window != null ? event.window : null; break;
  case "stalled": task.stalled = true; break;
  case "resumed": task.stalled = false; break;
  case "straggler": task.straggler = true; break;
  case "advice": setNote(task, "advised to " + (event.do || "checkpoint")); break;
  case "memory-warning": task.memoryMax = event.limit != null ? event.limit : task.memoryMax; task.memory = event.used; break;
  case "operator": setNote(task, "operator: " + (event.action || "")); break;
  case "skipped": task.state = "skipped"; addReason(task, event.reason); break;
  // A batch task's end, after its last attempt's `exited`: its state and why, as status says them.
  case "finished":
    // A batch's last word on a task; the exited line's outcome (cancelled, killed, oom)
    // says more than its `failed`, and stays.
    if (event.state && (event.state === "skipped" || !ended(task.state))) task.state = event.state;
    if (event.detail || event.reason) task.reason = event.detail || event.reason;
    break;
  case "retry": case "retrying": task.state = "retrying"; break;
  }
  if (task.state !== state) { countsDirty = true; task.stateEvent = eventsSeen; }
  touch(task);
}
function left(seconds) { return seconds == null ? "no limit" : duration(seconds * 1000) + " left"; }
function setNote(task, text, failed) { task.note = text; task.noteFailed = !!failed; }

// Seconds left now: the last figure less the time since it came. Without the supervisor the
// count stops where the stream dropped: what happened after is not known.
let droppedAt = null;
function remainingNow(task) { return countedDown(task, task.remaining, task.remainingAt); }
function hardLimitNow(task) { return countedDown(task, task.hardLimit, task.hardLimitAt); }
function countedDown(task, seconds, at) {
  if (seconds == null || !LIVE_STATES[task.state]) return null;
  return Math.max(0, seconds - ((droppedAt != null ? droppedAt : performance.now()) - at) / 1000);
}
// Over the last 30 s of samples: units (or fractions) a second, and the seconds to the end.
function rateAndEta(task) {
  const s = task.samples;
  if (s.length < 2) return null;
  const last = s[s.length - 1];
  let first = s[0];
  for (let i = s.length - 2; i >= 0 && last[0] - s[i][0] <= 30000; i--) first = s[i];
  const seconds = (last[0] - first[0]) / 1000;
  if (seconds <= 0) return null;
  const byCount = last[1] != null && first[1] != null;
  const rate = byCount ? (last[1] - first[1]) / seconds : (last[2] - first[2]) / seconds;
  if (!(rate > 0)) return { rate: 0, byCount: byCount, eta: null };
  const total = task.progress && task.progress.total;
  const eta = byCount ? (total ? (total - last[1]) / rate : null) : (1 - last[2]) / rate;
  return { rate: rate, byCount: byCount, eta: eta };
}
function rateText(task) {
  const r = rateAndEta(task);
  if (!r) return "–";
  const rate = r.byCount ? (r.rate >= 10 ? r.rate.toFixed(0) : r.rate.toFixed(2)) + "/s" : (r.rate * 6000).toFixed(1) + "%/min";
  return rate + " · " + (r.eta == null ? "–" : duration(r.eta * 1000));
}
function fractionOf(task) {
  const p = task.progress;
  if (!p) return null;
  return p.fraction != null ? p.fraction : p.total ? p.completed / p.total : null;
}
function progressText(task) {
  const p = task.progress;
  if (!p) return LIVE_STATES[task.state] ? "no progress yet" : "";
  const f = fractionOf(task);
  const count = p.completed != null ? p.completed + (p.total != null ? "/" + p.total : "") : "";
  return [p.title, p.detail, count, f == null ? "" : Math.round(f * 100) + "%"].filter(function (x) { return x != null && x !== ""; }).map(shown).join(" · ");
}
function memoryText(task) {
  if (task.memory == null && task.peak == null) return "–";
  const now = bytes(task.memory != null ? task.memory : task.peak);
  if (task.memoryMax != null) return now + " / " + bytes(task.memoryMax);
  return task.peak != null && task.memory != null ? now + " (peak " + bytes(task.peak) + ")" : now;
}
// Under a memory-max the row says now against the max; the peak, which may be above the
// max (a burst the limit caught), is said beside the max here, for the card and the tooltip.
function peakText(task) {
  return task.peak != null && task.memoryMax != null ? bytes(task.peak) + " of max " + bytes(task.memoryMax) : null;
}
function groupCounts(group) {
  const counts = {};
  Object.keys(group.folded).forEach(function (state) { counts[state] = (counts[state] || 0) + group.folded[state]; });
  group.elements.forEach(function (t) { counts[t.state] = (counts[t.state] || 0) + 1; });
  return counts;
}
function countsText(counts) {
  return STATE_ORDER.concat(Object.keys(counts).filter(function (s) { return STATE_ORDER.indexOf(s) < 0; }))
    .filter(function (s) { return counts[s]; }).map(function (s) { return counts[s] + " " + s; }).join(" · ");
}

// ---- the table: a fixed pool of row elements, only those in view ----
const ROW = 30;
const body = document.getElementById("table-body");
const rowsBox = document.getElementById("table-rows");
const filterInput = document.getElementById("filter");
const extendBy = document.getElementById("extend-by");
let items = [];
const slots = [];

function passes(task, words) {
  return !words || (task.name + " " + task.state + " " + task.reasons.join(" ") + " " + (task.phase || "")).toLowerCase().indexOf(words) >= 0;
}
function relayout() {
  layoutDirty = false;
  const words = filterInput.value.trim().toLowerCase();
  items = [];
  entries.forEach(function (entry) {
    if (!entry.isGroup) { if (passes(entry, words)) items.push(entry); return; }
    const shownElements = entry.elements.filter(function (t) { return passes(t, words); });
    if (shownElements.length || !words || entry.name.toLowerCase().indexOf(words) >= 0) items.push(entry);
    if (entry.open) shownElements.forEach(function (t) { items.push(t); });
  });
  setStyle(rowsBox, "height", items.length * ROW + "px");
  setStyle(body, "height", Math.min(Math.max(items.length, 1), 20) * ROW + 2 + "px");
  setText(document.getElementById("shown"), items.length + " rows, " + tasks.size + " tasks");
  slots.forEach(function (slot) { slot.item = null; });
}

function newSlot() {
  const row = make("div", "row");
  const cells = {};
  ["name", "state", "progress", "rate", "remaining", "memory", "attempts", "phase", "reason", "actions"].forEach(function (key) {
    const cell = make("div", key === "rate" || key === "remaining" || key === "memory" || key === "attempts" ? "num" : key === "name" ? "name" : "cell-text");
    cells[key] = cell;
    row.appendChild(cell);
  });
  const slot = { row: row, cells: cells, item: null };
  slot.swatch = make("span", "swatch");
  slot.stateWord = make("span", "cell-text");
  cells.state.appendChild(slot.swatch); cells.state.appendChild(slot.stateWord);
  const bar = make("div", "bar");
  slot.fill = make("div", "bar-fill");
  slot.label = make("div", "bar-label");
  bar.appendChild(slot.fill); bar.appendChild(slot.label);
  cells.progress.appendChild(bar);
  slot.reasonText = make("span", "cell-text");
  slot.note = make("span", "note");
  cells.reason.appendChild(slot.reasonText); cells.reason.appendChild(slot.note);
  cells.actions.className = "row-actions";
  slot.buttons = {};
  [["extend", "Extend"], ["revoke", "Revoke"], ["cancel", "Cancel"]].forEach(function (b) {
    const button = make("button", b[0] === "cancel" ? "danger" : "", b[1]);
    button.dataset.action = b[0];
    button.onclick = function () { if (slot.item) act(b[0], slot.item, extendBy.value); };
    slot.buttons[b[0]] = button;
    cells.actions.appendChild(button);
  });
  row.onclick = function (event) {
    if (event && event.target && (event.target.tagName === "BUTTON" || event.target.tagName === "INPUT")) return;
    if (!slot.item) return;
    if (slot.item.isGroup) { slot.item.open = !slot.item.open; layoutDirty = true; requestFrame(); } else select(slot.item);
  };
  rowsBox.appendChild(row);
  return slot;
}

function fillTask(slot, task) {
  const c = slot.cells;
  setText(c.name, (task.group ? "  " : "") + shown(task.name));
  setStyle(slot.swatch, "background", STATE_COLOR[task.state] || COLORS.waiting);
  setText(slot.stateWord, shown(task.state) + (task.stalled ? " (stalled)" : "") + (task.straggler ? " · straggler" : ""));
  const f = fractionOf(task);
  setStyle(slot.fill, "width", f == null ? "0%" : (Math.max(0, Math.min(1, f)) * 100).toFixed(1) + "%");
  setStyle(slot.fill, "background", STATE_COLOR[task.state] || COLORS.running);
  setText(slot.label, progressText(task));
  setText(c.rate, LIVE_STATES[task.state] ? rateText(task) : "–");
  const r = remainingNow(task);
  const hard = hardLimitNow(task);
  setText(c.remaining, (r == null ? (LIVE_STATES[task.state] && task.remaining === null ? "no limit" : "–") : duration(r * 1000))
    + (hard == null ? "" : " · max " + duration(hard * 1000)));
  c.remaining.classList.toggle("low", r != null && r < 10);
  setText(c.memory, memoryText(task));
  const peak = peakText(task);
  setTitle(c.memory, peak ? "peak " + peak : "");
  setText(c.attempts, task.attempts == null ? "–" : String(task.attempts));
  // The window beside the phase that rules it; a task that named no phase shows none.
  setText(c.phase, task.phase ? shown(task.phase) + (task.window != null ? " (" + duration(task.window * 1000) + ")" : "") : "");
  setText(slot.reasonText, shown(task.reasons.join("; ") || task.reason || ""));
  setText(slot.note, task.note ? " " + shown(task.note) : "");
  slot.note.classList.toggle("failed", task.noteFailed);
  const live = LIVE_STATES[task.state];
  slot.buttons.extend.hidden = !live; slot.buttons.revoke.hidden = !live;
  slot.buttons.cancel.hidden = ended(task.state);
}
function fillGroup(slot, group) {
  const c = slot.cells;
  const counts = groupCounts(group);
  let total = 0, done = 0;
  Object.keys(counts).forEach(function (s) { total += counts[s]; if (ended(s)) done += counts[s]; });
  setText(c.name, (group.open ? "▾ " : "▸ ") + shown(group.name) + " (" + total + ")");
  const grave = ["failed", "killed", "oom", "cancelled", "cancelling", "running", "waiting", "skipped", "succeeded"].find(function (s) { return counts[s]; });
  setStyle(slot.swatch, "background", STATE_COLOR[grave] || COLORS.waiting);
  setText(slot.stateWord, countsText(counts));
  setStyle(slot.fill, "width", total ? (done / total * 100).toFixed(1) + "%" : "0%");
  setStyle(slot.fill, "background", COLORS.succeeded);
  setText(slot.label, done + "/" + total + " ended");
  ["rate", "remaining", "memory", "attempts", "phase"].forEach(function (k) { setText(c[k], ""); });
  setTitle(c.memory, "");
  setText(slot.reasonText, shown(group.reason || ""));
  setText(slot.note, group.note ? " " + shown(group.note) : "");
  slot.buttons.extend.hidden = true; slot.buttons.revoke.hidden = true;
  slot.buttons.cancel.hidden = !(counts.running || counts.waiting || counts.starting || counts.retrying);
}

let ticking = false;
function renderRows() {
  const first = Math.max(0, Math.floor(body.scrollTop / ROW) - 4);
  const count = Math.min(items.length - first, Math.ceil(body.clientHeight / ROW) + 8);
  while (slots.length < count) slots.push(newSlot());
  for (let k = 0; k < slots.length; k++) {
    const slot = slots[k], item = k < count ? items[first + k] : null;
    if (!item) { slot.row.hidden = true; slot.item = null; continue; }
    const rebound = slot.item !== item;
    if (!rebound && !dirty.has(item) && !ticking) continue;
    if (rebound) { slot.item = item; slot.row.hidden = false; setStyle(slot.row, "top", (first + k) * ROW + "px"); }
    slot.row.classList.toggle("selected", item === selected);
    slot.row.classList.toggle("element", !!item.group);
    if (item.isGroup) fillGroup(slot, item); else fillTask(slot, item);
  }
}

const countsBox = document.getElementById("counts");
function renderCounts() {
  countsDirty = false;
  const counts = {};
  tasks.forEach(function (t) { counts[t.state] = (counts[t.state] || 0) + 1; });
  groups.forEach(function (g) { Object.keys(g.folded).forEach(function (s) { counts[s] = (counts[s] || 0) + g.folded[s]; }); });
  setText(countsBox, countsText(counts));
}

// One frame writes what the events since the last one changed, whatever their number.
let framePending = false;
function requestFrame() { if (!framePending) { framePending = true; requestAnimationFrame(frame); } }
function frame() {
  framePending = false;
  try {
    if (layoutDirty) relayout();
    if (countsDirty) renderCounts();
    renderRows();
    if (selected && (detailDirty || ticking)) renderDetail();
    timeline.drawIfChanged();
  } finally {
    dirty.clear();
    ticking = false;
    detailDirty = false;
  }
}
body.addEventListener("scroll", requestFrame);
filterInput.addEventListener("input", function () { layoutDirty = true; requestFrame(); });
window.addEventListener("resize", requestFrame);
// The budgets count down between updates: once a second the rows in view are written again
// (a cell whose text is the same is not touched).
setInterval(function () { ticking = true; requestFrame(); }, 1000);

// ---- the timeline: the run's attempts as the report draws them, growing (livetimeline.js) ----
const timeline = liveTimeline({ fractionOf: fractionOf, LIVE_STATES: LIVE_STATES, select: function (task) { select(task); },
  selected: function () { return selected; }, dropped: function () { return droppedAt != null; }, requestFrame: requestFrame });

// ---- the buttons ----
function act(action, item, extendText) {
  const name = item.name;
  const body = {};
  if (action === "extend") {
    const seconds = parseDuration(extendText);
    if (seconds == null) { setNote(item, "not a duration: " + extendText + " (say 10m, 90s, 1h30m)", true); touch(item); return null; }
    body.seconds = seconds;
  }
  if (action === "cancel" && !confirm("Cancel " + shown(name) + (item.isGroup ? " and every element of it that runs or waits" : "") + "? It is told why (user), then SIGTERM, then SIGKILL after its grace.")) return null;
  const sent = action + " sent…";
  setNote(item, sent);
  touch(item);
  return fetch("/api/tasks/" + encodeURIComponent(name) + "/" + action, {
    method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  }).then(function (response) {
    return response.json().catch(function () { return { ok: false, error: "HTTP " + response.status }; });
  }).then(function (reply) {
    // Done is said by the event that comes back, which may come before this reply: then
    // it stands. A refusal is said at once.
    if (reply && reply.ok) { if (item.note === sent) setNote(item, action + ": " + (reply.result || "accepted") + (item.isGroup ? "" : ", waiting for its event")); }
    else setNote(item, action + " refused: " + ((reply && reply.error) || "no reason given"), true);
    touch(item);
  }, function () {
    setNote(item, action + " not sent: the supervisor did not answer", true);
    touch(item);
  });
}

// ---- one task, chosen: its facts, progress chart, events and log tail ----
const detailCard = document.getElementById("detail-card");
const detailEvents = document.getElementById("detail-events");
const detailLog = document.getElementById("detail-log");
const chart = document.getElementById("progress-chart");
let eventsShown = 0, eventsDroppedShown = 0, logTimer = null;
function select(task) {
  const previous = selected;
  selected = task;
  timeline.touch();
  if (previous) dirty.add(previous);
  if (logTimer != null) { clearInterval(logTimer); logTimer = null; }
  if (!task) { detailCard.hidden = true; requestFrame(); return; }
  dirty.add(task);
  detailCard.hidden = false;
  detailEvents.textContent = "";
  eventsShown = 0; eventsDroppedShown = task.eventsDropped;
  detailLog.textContent = "";
  detailDirty = true;
  pollLog();
  logTimer = setInterval(pollLog, 2000);
  requestFrame();
}
// One read of a task's log at a time: on a stalled filesystem each is held for 10 s, and the
// server serves only a few at once.
let logReading = null;
function pollLog() {
  const task = selected;
  if (!task || logReading === task) return;
  logReading = task;
  const note = document.getElementById("log-note");
  fetch("/api/tasks/" + encodeURIComponent(task.name) + "/log?tail=200", { credentials: "same-origin" }).then(function (response) {
    if (response.status === 404) {
      return response.json().catch(function () { return {}; }).then(function (reply) {
        const error = new Error((reply && reply.error) || "HTTP 404"); error.noLog = true; throw error;
      });
    }
    if (!response.ok) throw new Error("HTTP " + response.status);
    return response.text();
  }).then(function (text) {
    if (logReading === task) logReading = null;
    if (task !== selected) return;
    setText(detailLog, shown(text));
    setText(note, "the last 200 lines, every 2 s");
  }, function (error) {
    if (logReading === task) logReading = null;
    if (task !== selected) return;
    // No log (`overtime run` keeps none) is no log for good, but for a task not started yet.
    if (error.noLog && task.state !== "waiting") {
      if (logTimer != null) { clearInterval(logTimer); logTimer = null; }
      setText(note, "no log: " + shown(error.message) + " (not asked again)");
    } else setText(note, "not read: " + shown(error.message));
  });
}
function renderDetail() {
  const task = selected;
  setText(document.getElementById("detail-name"), shown(task.name));
  setText(document.getElementById("detail-state"), shown(task.state));
  const r = remainingNow(task);
  const facts = [["pid", task.pid], ["attempts", task.attempts], ["budget left", r == null ? null : duration(r * 1000)],
    ["max-runtime left", hardLimitNow(task) == null ? null : duration(hardLimitNow(task) * 1000)],
    ["progress", progressText(task)], ["rate · ETA", rateText(task)], ["memory", memoryText(task)], ["peak", peakText(task)], ["phase", shown(task.phase || "")],
    ["window", task.window == null ? null : duration(task.window * 1000)],
    ["reasons", shown(task.reasons.join("; "))]].filter(function (f) { return f[1] != null && f[1] !== "" && f[1] !== "–"; });
  setText(document.getElementById("detail-facts"), facts.map(function (f) { return f[0] + ": " + f[1]; }).join("   "));
  setText(document.getElementById("detail-note"), shown(task.note));
  // Events are appended as they come; those let go since leave the list's head, and the
  // rest stay as they are. The list's items are task.events from its first on.
  const gone = Math.min(task.eventsDropped - eventsDroppedShown, eventsShown);
  for (let i = 0; i < gone; i++) detailEvents.removeChild(detailEvents.firstChild);
  eventsShown -= gone;
  eventsDroppedShown = task.eventsDropped;
  for (; eventsShown < task.events.length; eventsShown++) detailEvents.appendChild(make("li", null, shown(eventText(task.events[eventsShown]))));
  drawChart(task);
}
["extend", "revoke", "cancel"].forEach(function (action) {
  document.getElementById("detail-" + action).onclick = function () { if (selected) act(action, selected, document.getElementById("detail-extend-by").value); };
});
document.getElementById("detail-close").onclick = function () { select(null); };
document.addEventListener("keydown", function (event) { if (event.key === "Escape" && selected) select(null); });

function drawChart(task) {
  const dpr = window.devicePixelRatio || 1;
  const w = chart.clientWidth || 600, h = 150;
  if (chart.width !== Math.round(w * dpr)) { chart.width = Math.round(w * dpr); chart.height = Math.round(h * dpr); chart.style.height = h + "px"; }
  const c = chart.getContext("2d");
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.fillStyle = "#ffffff"; c.fillRect(0, 0, w, h);
  const left = 40, right = 10, top = 8, bottom = 18;
  const y = function (f) { return top + (1 - f) * (h - top - bottom); };
  c.strokeStyle = "#e5e7eb"; c.fillStyle = "#6b7280"; c.font = "11px system-ui, 'DejaVu Sans', sans-serif";
  [0, 0.5, 1].forEach(function (f) { c.beginPath(); c.moveTo(left, y(f)); c.lineTo(w - right, y(f)); c.stroke(); c.fillText(Math.round(f * 100) + "%", 6, y(f) + 4); });
  const s = task.samples.filter(function (p) { return p[2] != null; });
  if (s.length < 1) { c.fillText("no progress yet", left + 8, h / 2); return; }
  const t0 = s[0][0], t1 = Math.max(t0 + 1, s[s.length - 1][0]);
  const x = function (t) { return left + (t - t0) / (t1 - t0) * (w - left - right); };
  c.beginPath();
  s.forEach(function (p, i) { if (i === 0) c.moveTo(x(p[0]), y(p[2])); else c.lineTo(x(p[0]), y(p[2])); });
  c.strokeStyle = COLORS.running; c.lineWidth = 2; c.stroke(); c.lineWidth = 1;
  c.fillText(duration(t1 - t0), w - right - 60, h - 4);
}

// ---- the connection: the event stream, then status; again, with backoff, when it drops ----
const banner = document.getElementById("banner");
const runStatus = document.getElementById("run-status");
let source = null, backoff = 1000, retryTimer = null;
function say(text, className) { setText(runStatus, text); runStatus.className = "status " + className; }
function showBanner(text, gone) { setText(banner, text); banner.className = gone ? "banner gone" : "banner"; banner.hidden = false; }
let statusInFlight = false;
function loadStatus() {
  const asked = eventsSeen;
  statusInFlight = true;
  return fetch("/api/status", { credentials: "same-origin" }).then(function (response) {
    statusInFlight = false;
    if (response.status === 401 || response.status === 403) {
      const error = new Error("refused"); error.refused = true; throw error;
    }
    if (!response.ok) throw new Error("HTTP " + response.status);
    return response.json();
  }).then(function (reply) {
    if (typeof reply.run === "string") {
      setText(document.getElementById("run-title"), shown(reply.run));
      document.title = "Overtime live " + shown(reply.run);
    }
    applyStatus(reply, asked);
  }, function (error) { statusInFlight = false; throw error; });
}
// Memory and the hard limits come only in the status: read again every 5 s while the
// stream is open (events keep the rest current between).
setInterval(function () { if (source && source.readyState === 1 && !statusInFlight) loadStatus().catch(function () {}); }, 5000);
// The stream is opened first and the status read once it is open: an event that comes
// during the read is newer than the status (loadStatus's `asked`), and none falls between.
function connect() {
  retryTimer = null;
  const stream = source = new EventSource("/api/events");
  let opened = false;
  stream.onopen = function () {
    opened = true;
    loadStatus().then(function () {
      if (stream !== source) return;
      droppedAt = null;
      backoff = 1000;
      banner.hidden = true;
      say("live", "done");
    }, function (error) { if (stream === source) supervisorLost(error); });
  };
  stream.onmessage = function (message) {
    let event;
    try { event = JSON.parse(message.data); } catch (e) { return; }
    applyEvent(event);
  };
  // A stream that was open dropped: it is opened again, and the status read again then, so
  // nothing missed stays missed. One that never opened says nothing of why: the status read
  // does (a refusal, or no supervisor).
  stream.onerror = function () {
    if (stream !== source) return;
    stream.close();
    if (opened) { streamDropped(); return; }
    loadStatus().then(function () { if (stream === source) streamDropped(); },
      function (error) { if (stream === source) supervisorLost(error); });
  };
}
function closeStream() {
  if (source) { source.close(); source = null; }
  if (droppedAt == null) droppedAt = performance.now();
  timeline.touch();
  requestFrame();
}
function streamDropped() {
  closeStream();
  say("reconnecting", "open");
  showBanner("The event stream dropped; reconnecting.", false);
  retryLater();
}
function supervisorLost(error) {
  closeStream();
  if (error.refused) showBanner("The supervisor refused this page: open it again by the address with ?token= that the run printed. Showing the last state.", true);
  else if (tasks.size) showBanner("The supervisor is gone (the run ended, or it stopped): showing the last state it sent. Trying again every " + Math.round(backoff / 1000) + " s.", true);
  else showBanner("The supervisor does not answer. Trying again every " + Math.round(backoff / 1000) + " s.", true);
  say("gone", "stopped");
  retryLater();
}
function retryLater() {
  if (retryTimer != null) return;
  retryTimer = setTimeout(connect, backoff);
  backoff = Math.min(backoff * 2, 30000);
}
connect();
})();
