// The phases a task named (docs/hangs.md) and its stalls, drawn on its attempt's bar in the
// report's timeline. Part of page.html's one script, before page.js, whose drawing and
// tooltip call these with its canvas context `g` and its time-to-x function `X`.

// A phase's shade along the foot of its bar: one colour per name, in the order named.
const PHASE_COLORS = ["#1e3a8a", "#facc15", "#06b6d4", "#a3e635", "#f472b6", "#7c3aed", "#fb923c", "#14b8a6",
  "#e11d48", "#64748b", "#84cc16", "#0ea5e9"];
function phaseColor(index) { return PHASE_COLORS[index % PHASE_COLORS.length]; }

// The phases along the bar's foot, a quarter of its height: each from its start to the
// next one's or the attempt's end; none past the first one the data left out (-1).
function drawPhases(g, X, a, px, y, pw, h) {
  const p = a.phases, sh = Math.max(2, Math.round(h / 4));
  g.save();
  g.beginPath(); g.rect(px, y, pw, h); g.clip();
  for (let i = 0; i < p.length; i += 2) {
    if (p[i + 1] < 0) break;
    const x0 = X(p[i]), x1 = X(i + 2 < p.length ? p[i + 2] : a.stop);
    if (x1 < px || x0 > px + pw) continue;
    g.fillStyle = phaseColor(p[i + 1]);
    g.fillRect(Math.floor(x0), y + h - sh, Math.max(1, Math.round(x1) - Math.floor(x0)), sh);
  }
  g.restore();
}

// A stall darkens its part of the bar, up to its resume or the attempt's end.
function drawStalls(g, X, a, px, y, pw, h) {
  const s = a.stalls;
  g.save();
  g.beginPath(); g.rect(px, y, pw, h); g.clip();
  g.fillStyle = "rgba(17,24,39,0.45)";
  for (let i = 0; i < s.length; i += 2) {
    const x0 = Math.floor(X(s[i])), x1 = Math.round(X(s[i + 1] == null ? a.stop : s[i + 1]));
    g.fillRect(x0, y, Math.max(1, x1 - x0), h);
  }
  g.restore();
}

// The phase attempt `a` was in at time `t`: [name, start, end], or null; `names` are the
// run's phase names, which the attempt's phases number.
function phaseAt(a, t, names) {
  const p = a.phases;
  for (let i = p.length - 2; i >= 0; i -= 2) {
    if (p[i] <= t) return p[i + 1] < 0 ? null : [names[p[i + 1]], p[i], i + 2 < p.length ? p[i + 2] : a.stop];
  }
  return null;
}
