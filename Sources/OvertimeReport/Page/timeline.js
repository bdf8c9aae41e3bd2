// The run's timeline as the report (page.js) and the live page (live.js) draw it: a lane per
// GPU and per concurrency slot, a bar per attempt in its outcome's colour (striped while it
// runs), its progress, phases and stalls inside (phases.js), marks for a cancel, kill,
// operator's action, memory warning, advice or straggler, the time axis, zoom and pan, and
// what is under the pointer. Only the lanes in view are drawn, so thousands cost no more.
// Part of each page's one script, after common.js and phases.js.

const TEXT_ON = { cancelled: "#3d2800", skipped: "#1f2937", waiting: "#1f2937" };
const MARK_COLORS = { cancel: "#111827", kill: "#7f1d1d", operator: "#1d4ed8", memory: "#9d174d",
  advice: "#0f766e", straggler: "#b45309" };

const STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000,
  600000, 900000, 1800000, 3600000, 7200000, 10800000, 21600000, 43200000, 86400000];
function tickStep(span, most) {
  const raw = span / Math.max(1, most);
  for (let i = 0; i < STEPS.length; i++) if (STEPS[i] >= raw) return STEPS[i];
  return Math.ceil(raw / 86400000) * 86400000;
}
function tickLabel(ms, step) {
  if (step < 1000) return (ms / 1000).toFixed(step < 10 ? 3 : step < 100 ? 2 : 1) + "s";
  const s = Math.round(ms / 1000);
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60), rs = s % 60;
  if (m < 60) return m + "m" + (rs ? String(rs).padStart(2, "0") + "s" : "");
  const h = Math.floor(m / 60), rm = m % 60;
  return h + "h" + (rm ? String(rm).padStart(2, "0") + "m" : "");
}

// The first bar of `bars` that ends at or after t.
function firstEndingAfter(bars, t) {
  let lo = 0, hi = bars.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (bars[mid].attempt.stop < t) lo = mid + 1; else hi = mid; }
  return lo;
}

// Draws `model` on `parts` (canvas, scroller, spacer, tooltip, zoomIn, zoomOut, zoomFit) and
// takes the pointer there. The model is read again at every draw, so a page that grows it
// (the live page) only asks for a draw:
//   lanes    [{label, gpu}], with bars: [[{task, attempt}]] by lane, sorted by start, that
//            never overlap in a lane; an attempt has start, stop (ms since the run's start),
//            open, outcome, lanes, marks [[ms, kind, text]], progress [ms, fraction, …],
//            phases and stalls (phases.js), retry (why it was retried, if it was)
//   skipped  tasks that never ran, each a diamond at its `finished` in a lane of their own
//   tasks    whose attempts' retries are drawn as curves from one to the next
//   resumes  where a resumed run took over (ms)
//   end      the run's end, or the last time known; open: it runs on, up to a line at end
//            named endLabel; follow: a fitted view keeps end at its right edge
//   axisLabel  what the axis counts from
// hooks: label(bar) the text on a bar; describe(box, task, attempt, t) fills the tooltip;
// select(task) on a click (null off every bar); selected() the task to outline.
function timelineView(parts, model, hooks) {
  const GUTTER = 118, AXIS = 26, RIGHT = 14;
  const canvas = parts.canvas, scroller = parts.scroller, tooltip = parts.tooltip;
  const g = canvas.getContext("2d");
  let laneCount = -1, skippedLane = -1, LANE = 30, viewHeight = 0;
  // The lanes' height, again when their number changed.
  function layout() {
    const count = model.lanes.length + (model.skipped.length ? 1 : 0);
    if (count === laneCount) return;
    laneCount = count;
    skippedLane = model.skipped.length ? model.lanes.length : -1;
    LANE = laneCount <= 12 ? 30 : Math.max(5, Math.min(30, Math.floor(460 / laneCount)));
    const fullHeight = AXIS + laneCount * LANE + 6;
    viewHeight = Math.min(fullHeight, 540);
    canvas.style.height = viewHeight + "px";
    scroller.style.height = viewHeight + 2 + "px";
    parts.spacer.style.height = (fullHeight - viewHeight) + "px";
  }
  layout();

  const view = { t0: 0, t1: 1 };
  // A view the person has not panned or zoomed follows the run's end.
  let fitted = true;
  function runEnd() { return Math.max(model.end, 1); }
  function place() { const pad = runEnd() * 0.015; view.t0 = -pad; view.t1 = runEnd() + (model.follow ? 0 : pad); }
  function fit() { fitted = true; place(); }
  fit();
  let width = 0;
  function plotWidth() { return Math.max(10, width - GUTTER - RIGHT); }
  function X(t) { return GUTTER + (t - view.t0) / (view.t1 - view.t0) * plotWidth(); }
  function T(x) { return view.t0 + (x - GUTTER) / plotWidth() * (view.t1 - view.t0); }

  let stripes = null;
  function stripePattern() {
    const tile = document.createElement("canvas");
    tile.width = 8; tile.height = 8;
    const t = tile.getContext("2d");
    t.fillStyle = COLORS.running; t.fillRect(0, 0, 8, 8);
    t.strokeStyle = "#93c5fd"; t.lineWidth = 2.5;
    t.beginPath(); t.moveTo(-2, 10); t.lineTo(10, -2); t.moveTo(6, 10); t.lineTo(10, 6); t.moveTo(-2, 2); t.lineTo(2, -2); t.stroke();
    return g.createPattern(tile, "repeat");
  }

  let drawPending = false;
  function requestDraw() { if (!drawPending) { drawPending = true; requestAnimationFrame(draw); } }
  function laneTop(lane) { return AXIS + lane * LANE - scroller.scrollTop; }

  function draw() {
    drawPending = false;
    layout();
    if (fitted) place();
    const dpr = window.devicePixelRatio || 1;
    width = canvas.clientWidth;
    const height = viewHeight;
    if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
    }
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#ffffff";
    g.fillRect(0, 0, width, height);
    if (!stripes) stripes = stripePattern();
    const top = scroller.scrollTop;
    const first = Math.max(0, Math.floor(top / LANE));
    const last = Math.min(laneCount - 1, Math.floor((top + height - AXIS) / LANE));
    for (let lane = first; lane <= last; lane++) {
      if (lane % 2 === 1) { g.fillStyle = "#f8fafc"; g.fillRect(GUTTER, laneTop(lane), width - GUTTER, LANE); }
    }
    const step = tickStep(view.t1 - view.t0, plotWidth() / 90);
    g.strokeStyle = "#e5e7eb"; g.lineWidth = 1;
    g.beginPath();
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      const x = Math.round(X(t)) + 0.5;
      g.moveTo(x, AXIS); g.lineTo(x, height);
    }
    g.stroke();

    g.save();
    g.beginPath(); g.rect(GUTTER, AXIS, width - GUTTER, height - AXIS); g.clip();
    const pad = LANE >= 16 ? 4 : LANE >= 8 ? 1 : 0;
    const selected = hooks.selected();
    const labels = [], marks = [], outlines = [];
    for (let lane = first; lane <= last && lane < model.bars.length; lane++) {
      const bars = model.bars[lane];
      const y = laneTop(lane) + pad, h = LANE - 2 * pad;
      let lastPixel = -1;
      for (let i = firstEndingAfter(bars, view.t0); i < bars.length && bars[i].attempt.start <= view.t1; i++) {
        const bar = bars[i], a = bar.attempt;
        const px = Math.floor(X(a.start));
        const pw = Math.max(1, Math.round(X(a.stop)) - px);
        // Many short bars in one pixel column: one rectangle shows them, a failure over a success.
        if (pw === 1 && px === lastPixel && a.outcome === "succeeded") continue;
        lastPixel = px + pw - 1;
        g.fillStyle = a.open ? stripes : COLORS[a.outcome];
        g.fillRect(px, y, pw, h);
        if (pw >= 16 && h >= 12 && a.progress.length >= 4) drawProgress(a, px, y, pw, h);
        if (a.phases.length && h >= 5) drawPhases(g, X, a, px, y, pw, h);
        if (a.stalls.length) drawStalls(g, X, a, px, y, pw, h);
        if (pw > 36 && h >= 14) labels.push([bar, px, y, pw, h]);
        if (selected === bar.task) outlines.push([px, y, pw, h]);
        for (let m = 0; m < a.marks.length; m++) {
          const mark = a.marks[m];
          if (mark[0] >= view.t0 && mark[0] <= view.t1) marks.push([X(mark[0]), y, h, mark]);
        }
      }
    }
    if (skippedLane >= first && skippedLane <= last) {
      const y = laneTop(skippedLane) + LANE / 2;
      const r = Math.max(2, Math.min(6, LANE / 2 - 2));
      g.fillStyle = COLORS.skipped;
      model.skipped.forEach(function (task) {
        const x = X(task.finished);
        if (x < GUTTER - r || x > width + r) return;
        g.beginPath(); g.moveTo(x, y - r); g.lineTo(x + r, y); g.lineTo(x, y + r); g.lineTo(x - r, y); g.closePath(); g.fill();
        if (selected === task) outlines.push([x - r - 1, y - r - 1, 2 * r + 2, 2 * r + 2]);
      });
      if (model.skipped.length <= 12 && LANE >= 16) {
        g.font = "11px system-ui, 'DejaVu Sans', sans-serif"; g.textBaseline = "middle"; g.fillStyle = "#4b5563";
        model.skipped.forEach(function (task) {
          const name = shown(task.name), x = X(task.finished), w = g.measureText(name).width;
          g.fillText(name, x + r + 4 + w > width - 4 ? x - r - 4 - w : x + r + 4, y + 0.5);
        });
      }
    }
    g.font = "12px system-ui, 'DejaVu Sans', sans-serif";
    g.textBaseline = "middle";
    labels.forEach(function (l) {
      const a = l[0].attempt;
      g.save();
      g.beginPath(); g.rect(l[1] + 1, l[2], l[3] - 2, l[4]); g.clip();
      g.fillStyle = a.open ? "#ffffff" : TEXT_ON[a.outcome] || "#ffffff";
      g.fillText(hooks.label(l[0]), l[1] + 6, l[2] + l[4] / 2 + 0.5);
      g.restore();
    });
    drawRetries(first, last);
    const sayReasons = marks.length <= 80 && LANE >= 14;
    g.font = "bold 11px system-ui, 'DejaVu Sans', sans-serif";
    marks.forEach(function (m) {
      const x = Math.round(m[0]), y = m[1], h = m[2], mark = m[3];
      g.fillStyle = MARK_COLORS[mark[1]] || "#111827";
      g.fillRect(x - 1, y - 2, 2, h + 4);
      if (mark[1] === "cancel" && h >= 8) {
        g.beginPath(); g.moveTo(x - 4, y - 2); g.lineTo(x + 4, y - 2); g.lineTo(x, y + 3); g.closePath(); g.fill();
      }
      if (sayReasons) {
        // Beside the mark, on its left where the right edge would cut it.
        const w = g.measureText(mark[2]).width;
        const tx = x + 5 + w > width - 4 ? x - 5 - w : x + 5;
        g.lineWidth = 3; g.strokeStyle = "rgba(255,255,255,0.92)";
        g.strokeText(mark[2], tx, y + h / 2 + 0.5);
        g.fillText(mark[2], tx, y + h / 2 + 0.5);
      }
    });
    g.strokeStyle = "#111827"; g.lineWidth = 2;
    outlines.forEach(function (o) { g.strokeRect(o[0] - 1, o[1] - 1, o[2] + 2, o[3] + 2); });
    // Where a resumed run took over the journal.
    g.setLineDash([6, 4]); g.strokeStyle = "#7c3aed"; g.lineWidth = 1.5;
    model.resumes.forEach(function (start) {
      const x = Math.round(X(start)) + 0.5;
      g.beginPath(); g.moveTo(x, AXIS); g.lineTo(x, height); g.stroke();
    });
    g.setLineDash([]);
    if (model.open) {
      const x = Math.round(X(model.end)) + 0.5;
      g.setLineDash([4, 3]); g.strokeStyle = "#1d4ed8"; g.lineWidth = 1;
      g.beginPath(); g.moveTo(x, AXIS); g.lineTo(x, height); g.stroke(); g.setLineDash([]);
    }
    g.restore();

    // The axis and the lane names stay put as the lanes scroll under them.
    g.fillStyle = "#ffffff"; g.fillRect(0, 0, width, AXIS);
    g.fillStyle = "#ffffff"; g.fillRect(0, AXIS, GUTTER, height - AXIS);
    g.strokeStyle = "#d1d5db"; g.lineWidth = 1;
    g.beginPath(); g.moveTo(0, AXIS - 0.5); g.lineTo(width, AXIS - 0.5); g.moveTo(GUTTER - 0.5, 0); g.lineTo(GUTTER - 0.5, height); g.stroke();
    g.font = "11px system-ui, 'DejaVu Sans', sans-serif"; g.textBaseline = "middle";
    // The end of an open run is named on the axis; the ticks under its name give way.
    let endLabel = null;
    if (model.open) {
      const text = model.endLabel, w = g.measureText(text).width;
      const right = Math.min(width - 4, X(model.end) - 4);
      if (right - w > GUTTER) endLabel = { text: text, left: right - w - 14, right: right + 14 };
    }
    g.fillStyle = "#4b5563"; g.textAlign = "center";
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      const x = X(t);
      if (endLabel && x > endLabel.left && x < endLabel.right) continue;
      if (x > GUTTER + 12 && x < width - 12) g.fillText(tickLabel(t, step), x, AXIS / 2);
    }
    g.textAlign = "left";
    g.fillStyle = "#6b7280"; g.fillText(model.axisLabel, 8, AXIS / 2);
    g.fillStyle = "#7c3aed";
    model.resumes.forEach(function (start) {
      const x = X(start);
      if (x > GUTTER && x < width - 60) { g.fillStyle = "#ffffff"; g.fillRect(x + 2, 3, g.measureText("resumed").width + 6, AXIS - 6); g.fillStyle = "#7c3aed"; g.fillText("resumed", x + 5, AXIS / 2); }
    });
    if (endLabel) { g.fillStyle = "#1d4ed8"; g.textAlign = "right"; g.fillText(endLabel.text, endLabel.right - 14, AXIS / 2); g.textAlign = "left"; }
    const every = LANE >= 11 ? 1 : Math.ceil(11 / LANE);
    g.font = (LANE >= 14 ? "12px" : "10px") + " system-ui, 'DejaVu Sans', sans-serif";
    g.textAlign = "right";
    for (let lane = first; lane <= last; lane++) {
      if (lane % every !== 0) continue;
      const y = laneTop(lane) + LANE / 2;
      if (y < AXIS + 4) continue;
      const gpu = lane < model.lanes.length && model.lanes[lane].gpu != null;
      g.fillStyle = gpu ? "#7c3aed" : "#374151";
      g.fillText(lane === skippedLane ? "skipped" : model.lanes[lane].label, GUTTER - 10, y + 0.5);
    }
    g.textAlign = "left";
  }

  function drawProgress(a, px, y, pw, h) {
    const p = a.progress;
    const inset = 2, base = y + h - inset, span = h - 2 * inset;
    g.save();
    g.beginPath(); g.rect(px, y, pw, h); g.clip();
    g.beginPath();
    g.moveTo(X(p[0]), base);
    for (let i = 0; i < p.length; i += 2) g.lineTo(X(p[i]), base - p[i + 1] * span);
    g.lineTo(X(p[p.length - 2]), base);
    g.closePath();
    g.fillStyle = "rgba(255,255,255,0.22)"; g.fill();
    g.beginPath();
    for (let i = 0; i < p.length; i += 2) { const x = X(p[i]), yy = base - p[i + 1] * span; if (i === 0) g.moveTo(x, yy); else g.lineTo(x, yy); }
    g.strokeStyle = "rgba(255,255,255,0.85)"; g.lineWidth = 1.25; g.stroke();
    g.restore();
  }

  function drawRetries(first, last) {
    g.setLineDash([4, 3]); g.strokeStyle = "#6b7280"; g.lineWidth = 1.5;
    g.beginPath();
    let drawn = 0;
    for (let i = 0; i < model.tasks.length && drawn < 4000; i++) {
      const list = model.tasks[i].attempts;
      for (let j = 1; j < list.length; j++) {
        const from = list[j - 1], to = list[j];
        // A retry, not a rerun by --resume.
        if (!from.retry || !from.lanes.length || !to.lanes.length) continue;
        const l0 = from.lanes[0], l1 = to.lanes[0];
        if ((l0 < first && l1 < first) || (l0 > last && l1 > last)) continue;
        if (to.start < view.t0 || from.stop > view.t1) continue;
        const y0 = laneTop(l0) + LANE / 2, y1 = laneTop(l1) + LANE / 2;
        const x0 = X(from.stop), x1 = X(to.start);
        g.moveTo(x0, y0); g.bezierCurveTo(x0 + 18, y0, x1 - 18, y1, x1, y1);
        drawn++;
      }
    }
    g.stroke(); g.setLineDash([]);
  }

  // ---- finding what is under the pointer ----
  function hit(x, y) {
    if (x < GUTTER || y < AXIS) return null;
    const lane = Math.floor((y - AXIS + scroller.scrollTop) / LANE);
    const slack = 3 * (view.t1 - view.t0) / plotWidth();
    const t = T(x);
    if (lane === skippedLane) {
      let best = null, bestDistance = 8;
      model.skipped.forEach(function (task) { const d = Math.abs(X(task.finished) - x); if (d < bestDistance) { best = task; bestDistance = d; } });
      return best ? { task: best, attempt: null } : null;
    }
    const bars = model.bars[lane];
    if (!bars) return null;
    let best = null, bestDistance = Infinity;
    for (let i = firstEndingAfter(bars, t - slack); i < bars.length && bars[i].attempt.start <= t + slack; i++) {
      const a = bars[i].attempt;
      const d = t < a.start ? a.start - t : t > a.stop ? t - a.stop : 0;
      if (d < bestDistance) { best = bars[i]; bestDistance = d; }
    }
    return best;
  }

  function showTooltip(found, event) {
    if (!found) { tooltip.hidden = true; return; }
    hooks.describe(tooltip, found.task, found.attempt, event.target === canvas ? T(event.offsetX) : null);
    tooltip.hidden = false;
    const w = tooltip.offsetWidth, h = tooltip.offsetHeight;
    let left = event.clientX + 14, top = event.clientY + 14;
    if (left + w > window.innerWidth - 8) left = event.clientX - w - 14;
    if (top + h > window.innerHeight - 8) top = event.clientY - h - 14;
    tooltip.style.left = Math.max(4, left) + "px";
    tooltip.style.top = Math.max(4, top) + "px";
  }

  let drag = null;
  canvas.addEventListener("mousedown", function (event) {
    drag = { x: event.clientX, t0: view.t0, t1: view.t1, moved: false };
    canvas.classList.add("dragging");
  });
  window.addEventListener("mouseup", function (event) {
    if (!drag) return;
    const wasClick = !drag.moved;
    drag = null;
    canvas.classList.remove("dragging");
    if (wasClick && event.target === canvas) {
      const found = hit(event.offsetX, event.offsetY);
      hooks.select(found ? found.task : null);
    }
  });
  window.addEventListener("mousemove", function (event) {
    if (drag) {
      const dx = event.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (drag.moved) {
        const dt = dx / plotWidth() * (drag.t1 - drag.t0);
        fitted = false;
        view.t0 = drag.t0 - dt; view.t1 = drag.t1 - dt;
        tooltip.hidden = true;
        requestDraw();
      }
      return;
    }
    if (event.target === canvas) showTooltip(hit(event.offsetX, event.offsetY), event);
    else tooltip.hidden = true;
  });
  canvas.addEventListener("mouseleave", function () { tooltip.hidden = true; });
  function zoom(factor, x) {
    const t = T(x);
    const span = Math.max(5, Math.min(runEnd() * 4, (view.t1 - view.t0) * factor));
    const ratio = (t - view.t0) / (view.t1 - view.t0);
    fitted = false;
    view.t0 = t - ratio * span; view.t1 = view.t0 + span;
    requestDraw();
  }
  canvas.addEventListener("wheel", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) {
      event.preventDefault();
      zoom(Math.exp(event.deltaY * 0.002), event.offsetX);
    } else if (Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
      event.preventDefault();
      const dt = event.deltaX / plotWidth() * (view.t1 - view.t0);
      fitted = false;
      view.t0 += dt; view.t1 += dt;
      requestDraw();
    }
  }, { passive: false });
  parts.zoomIn.onclick = function () { zoom(0.5, GUTTER + plotWidth() / 2); };
  parts.zoomOut.onclick = function () { zoom(2, GUTTER + plotWidth() / 2); };
  parts.zoomFit.onclick = function () { fit(); requestDraw(); };
  canvas.addEventListener("dblclick", function () { fit(); requestDraw(); });
  scroller.addEventListener("scroll", requestDraw);

  return { requestDraw: requestDraw, draw: draw, laneCount: function () { return laneCount; } };
}
