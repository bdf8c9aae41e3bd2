"use strict";
// The live page's timeline: the run's attempts as the report draws them (timeline.js),
// growing as the events come. live.js makes one (liveTimeline) and tells it the status and
// each event; `page` is what it needs of live.js: fractionOf(task), LIVE_STATES,
// select(task), selected(), dropped() (the stream is down: "now" stops), requestFrame().
function liveTimeline(page) {
  // Times are the page's own clock when status or an event came, so a bar never starts past
  // "now" whatever the supervisor's clock says; the axis counts from the first start seen.
  // Attempts are packed into lanes as the report packs them: each into the lowest slot free
  // at its start, and one that holds GPUs (its `attempt` line says which) into theirs.
  const MARK_LIMIT = 100;
  const timelineModel = { lanes: [], bars: [], skipped: [], tasks: [], resumes: [], end: 0, open: true,
    endLabel: "now", follow: true, axisLabel: "since first seen" };
  const openAttempts = new Set();
  const phaseNames = [];
  let origin = null, gpuLanes = 0, timelineDirty = false, legendDirty = true;
  function sinceOrigin(wall) {
    if (origin == null) origin = wall;
    return wall - origin;
  }
  function laneFor(attempt, gpus) {
    if (gpus && gpus.length) {
      return gpus.map(function (id) {
        let lane = timelineModel.lanes.findIndex(function (l) { return l.gpu === String(id); });
        if (lane < 0) {
          // GPU lanes come first, as in the report.
          lane = gpuLanes++;
          timelineModel.lanes.splice(lane, 0, { label: "GPU " + shown(id), gpu: String(id) });
          timelineModel.bars.splice(lane, 0, []);
        }
        return lane;
      });
    }
    for (let lane = gpuLanes; lane < timelineModel.bars.length; lane++) {
      const bars = timelineModel.bars[lane];
      if (!bars.length || !bars[bars.length - 1].attempt.open) return [lane];
    }
    timelineModel.lanes.push({ label: "slot " + (timelineModel.lanes.length - gpuLanes + 1), gpu: null });
    timelineModel.bars.push([]);
    return [timelineModel.lanes.length - 1];
  }
  function openAttempt(task, start) {
    closeAttempt(task, start, "failed");
    if (!task.timeline) { task.timeline = { name: task.name, attempts: [] }; timelineModel.tasks.push(task.timeline); }
    const attempt = { start: start, stop: start, open: true, outcome: "running", seq: task.timeline.attempts.length + 1, lanes: [],
      marks: [], moreMarks: 0, progress: [], pointAt: -Infinity, phases: [], stalls: [] };
    task.timeline.attempts.push(attempt);
    task.openAttempt = attempt;
    openAttempts.add(attempt);
    laneFor(attempt, task.gpus).forEach(function (lane) { timelineModel.bars[lane].push({ task: task, attempt: attempt }); });
    task.gpus = null;
    timelineDirty = true;
  }
  // `word` is the exited line's outcome: the report's colours know succeeded, cancelled,
  // killed and oom; every other word is a failure.
  function closeAttempt(task, stop, word) {
    const attempt = task.openAttempt;
    if (!attempt) return;
    attempt.open = false;
    attempt.stop = Math.max(attempt.start, stop);
    attempt.outcome = COLORS[word] && word !== "running" && word !== "waiting" && word !== "skipped" ? word : "failed";
    openAttempts.delete(attempt);
    task.openAttempt = null;
    timelineDirty = true;
  }
  function addMark(task, t, kind, text) {
    const attempt = task.openAttempt;
    if (!attempt) return;
    if (attempt.marks.length < MARK_LIMIT) attempt.marks.push([t, kind, shown(text)]); else attempt.moreMarks++;
    timelineDirty = true;
  }
  // A point of the bar's progress a second at most: the last one moves until a second passed.
  function addPoint(task, t, fraction) {
    const attempt = task.openAttempt;
    if (!attempt || fraction == null || !isFinite(fraction)) return;
    const p = attempt.progress, f = Math.max(0, Math.min(1, fraction));
    if (t - attempt.pointAt >= 1000 || !p.length) { p.push(t, f); attempt.pointAt = t; } else { p[p.length - 2] = t; p[p.length - 1] = f; }
    // A long attempt keeps every other point: the bar is no wider than the screen.
    if (p.length > 1200) attempt.progress = p.filter(function (v, i) { return i % 4 < 2; });
  }
  function phaseIndex(name) {
    let i = phaseNames.indexOf(name);
    if (i < 0) { i = phaseNames.length; phaseNames.push(name); legendDirty = true; }
    return i;
  }
  // What the timeline is told of an event, at `t` on its axis.
  function timelineEvent(task, event, t) {
    switch (event.event) {
    case "attempt": task.gpus = event.resources && Array.isArray(event.resources.gpu) ? event.resources.gpu : null; break;
    case "started": openAttempt(task, t); break;
    case "progress": addPoint(task, t, page.fractionOf(task)); break;
    case "exited": closeAttempt(task, t, event.outcome || (event.exit_code === 0 ? "succeeded" : "failed")); break;
    case "cancel": addMark(task, t, "cancel", event.reason || "cancel"); break;
    case "kill": addMark(task, t, "kill", event.signal || "SIGKILL"); break;
    case "operator": addMark(task, t, "operator", event.action || "operator"); break;
    case "memory-warning": addMark(task, t, "memory", "memory warning" + (event.used != null ? " at " + bytes(event.used) : "")); break;
    case "advice": addMark(task, t, "advice", "advised to " + (event.do || "checkpoint")); break;
    case "straggler": addMark(task, t, "straggler", "straggler" + (event.action === "restart" ? ", restarted" : "")); break;
    case "phase":
      if (task.openAttempt && event.name) { task.openAttempt.phases.push(t, phaseIndex(String(event.name))); timelineDirty = true; }
      break;
    case "stalled": if (task.openAttempt) { task.openAttempt.stalls.push(t, null); timelineDirty = true; } break;
    case "resumed": {
      const s = task.openAttempt ? task.openAttempt.stalls : [];
      if (s.length && s[s.length - 1] == null) { s[s.length - 1] = t; timelineDirty = true; }
      break;
    }
    case "skipped": task.finished = t; timelineModel.skipped.push(task); timelineDirty = true; break;
    }
  }
  // What status says of a task's attempt: one running since `elapsed` opens a bar; one the
  // page saw open that no longer runs ended while the stream was down, at least by now.
  function timelineStatus(task, s, wall) {
    if (page.LIVE_STATES[s.state] && !task.openAttempt && typeof s.elapsed === "number") openAttempt(task, sinceOrigin(wall - s.elapsed * 1000));
    else if (!page.LIVE_STATES[s.state] && task.openAttempt) closeAttempt(task, sinceOrigin(wall), s.state);
  }

  const timeline = timelineView({
    canvas: document.getElementById("timeline"), scroller: document.getElementById("timeline-scroll"),
    spacer: document.getElementById("timeline-spacer"), tooltip: document.getElementById("tooltip"),
    zoomIn: document.getElementById("zoom-in"), zoomOut: document.getElementById("zoom-out"), zoomFit: document.getElementById("zoom-fit"),
  }, timelineModel, {
    label: function (bar) { return shown(bar.task.name) + (bar.task.timeline.attempts.length > 1 ? "  #" + bar.attempt.seq : ""); },
    describe: describeBar,
    select: page.select,
    selected: page.selected,
  });
  function describeBar(box, task, attempt, t) {
    box.textContent = "";
    const lines = [shown(task.name) + (attempt ? "  attempt " + attempt.seq : "")];
    if (attempt) {
      lines.push((attempt.open ? "running" : attempt.outcome) + " · from +" + duration(attempt.start) + (attempt.open ? " for " : ", ran ") + duration(attempt.stop - attempt.start));
      const p = attempt.progress;
      if (p.length) lines.push("progress " + Math.round(p[p.length - 1] * 100) + "%");
      const phase = t != null ? phaseAt(attempt, t, phaseNames) : null;
      if (phase) lines.push("phase " + shown(phase[0]) + " from +" + duration(phase[1]));
      attempt.marks.forEach(function (m) { lines.push(m[1] + " at +" + duration(m[0]) + ": " + m[2]); });
      if (attempt.moreMarks) lines.push(attempt.moreMarks + " more marks");
    } else {
      lines.push("skipped" + (task.reasons.length ? " · " + shown(task.reasons.join("; ")) : "") + " at +" + duration(task.finished));
    }
    lines.forEach(function (text) { box.appendChild(make("div", "line", text)); });
  }
  // The right edge is now, moved on at most four times a second; without the supervisor it
  // stays where the stream dropped.
  function drawTimeline() {
    timelineDirty = false;
    if (origin == null) return;
    if (!page.dropped()) timelineModel.end = Date.now() - origin;
    timelineModel.endLabel = page.dropped() ? "last seen" : "now";
    openAttempts.forEach(function (a) { a.stop = Math.max(a.start, timelineModel.end); });
    if (legendDirty) renderLegend();
    timeline.draw();
  }
  setInterval(function () { if (openAttempts.size && !page.dropped()) { timelineDirty = true; page.requestFrame(); } }, 250);

  function renderLegend() {
    legendDirty = false;
    const legend = document.getElementById("legend");
    legend.textContent = "";
    function key(color, text, className) {
      const item = make("span");
      const swatch = make("span", className || "swatch");
      if (color) swatch.style.background = color;
      item.appendChild(swatch); item.appendChild(make("span", null, text));
      legend.appendChild(item);
    }
    key(null, "running", "swatch stripe-key");
    ["succeeded", "failed", "cancelled", "killed", "oom"].forEach(function (o) { key(COLORS[o], o === "oom" ? "out of memory" : o); });
    key(null, "cancel (its reason beside it)", "mark-key");
    phaseNames.forEach(function (name, i) { key(phaseColor(i), "phase " + shown(name)); });
  }

  return {
    // The first status: the axis starts at the earliest start it shows.
    begin: function (reply, wall) {
      if (origin != null) return;
      origin = wall;
      (reply.tasks || []).forEach(function (s) {
        if (s && page.LIVE_STATES[s.state] && typeof s.elapsed === "number") origin = Math.min(origin, wall - s.elapsed * 1000);
      });
    },
    status: timelineStatus,
    event: function (task, event, wall) { timelineEvent(task, event, sinceOrigin(wall)); },
    touch: function () { timelineDirty = true; },
    drawIfChanged: function () { if (timelineDirty) drawTimeline(); },
  };
}
