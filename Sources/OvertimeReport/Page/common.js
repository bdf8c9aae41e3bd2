"use strict";
// What the run report's page (page.js) and the live page (live.js) share: how an error is
// kept in the page, the outcome colours, escaping, how durations and sizes read, task text
// with its bidi controls made visible, and elements made with text. The
// first file of each page's one <script> element: its "use strict" is the element's, and
// what it defines is there for the files after it.

// Errors are kept in the page (a test reads them from the DOM), besides the console.
const errorBox = document.getElementById("errors");
const errors = [];
function recordError(text) {
  errors.push(String(text));
  errorBox.textContent = errors.join("\n");
  errorBox.hidden = false;
  document.body.dataset.errors = String(errors.length);
}
window.onerror = function (message, source, line, column) { recordError(message + " (line " + line + ":" + column + ")"); };
window.addEventListener("unhandledrejection", function (event) { recordError("unhandled rejection: " + event.reason); });

const COLORS = { succeeded: "#2f9e62", failed: "#d9453d", cancelled: "#f0a020", killed: "#8b46c2",
  oom: "#d6408f", skipped: "#9aa3ad", running: "#3b82f6", waiting: "#cbd5e1" };
function esc(text) {
  return String(text).replace(/[&<>"']/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]; });
}
function duration(ms) {
  if (ms == null || !isFinite(ms)) return "–";
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  if (s < 60) return (s < 10 ? s.toFixed(2) : s.toFixed(1)) + " s";
  const m = Math.floor(s / 60), rest = Math.floor(s - m * 60);
  if (m < 60) return m + "m " + String(rest).padStart(2, "0") + "s";
  const h = Math.floor(m / 60);
  return h + "h " + String(m % 60).padStart(2, "0") + "m";
}
function bytes(n) {
  if (n == null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return (unit === 0 ? value : value.toFixed(value < 10 ? 1 : 0)) + " " + units[unit];
}
// A name, title or log line that holds bidi controls would read reordered (an `exe.txt`
// that is `txt.exe`): each is shown as its code point instead.
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
function shown(text) {
  return text == null ? "" : String(text).replace(BIDI, function (c) { return "⟨U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "⟩"; });
}
// An element with its class and text (text, never markup).
function make(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text != null) element.textContent = text;
  return element;
}
