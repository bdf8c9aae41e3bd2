"use strict";
// The report page's sweeps and arrays: a row each in page.js's table, counting its
// elements, which opens to a table comparing them. A file of its own so that each of the
// page's scripts can be read whole. They fill page.html's one <script> element, this file
// after common.js and before page.js, so that page.js finds sweepsAndArrays defined;
// page.js calls it once, before it draws.

// The run's groups (data.groups) with their elements gathered and counted; each task is
// given its group (`task.group`, an index into them, or null) and each entry of the table
// its `rank`. `table` is what the rows share with page.js's own: ORDER, WORDS, esc,
// swatch, outcomeCell, stragglerTag, duration, offset, peakCell, peakWidth, rowStart,
// isSelected(task), and resultColumns (the task table's, given once it has them: a group's
// row leaves them blank).
function sweepsAndArrays(data, tasks, table) {
  const ORDER = table.ORDER, WORDS = table.WORDS, esc = table.esc, swatch = table.swatch, outcomeCell = table.outcomeCell,
    stragglerTag = table.stragglerTag,
    duration = table.duration, offset = table.offset, peakCell = table.peakCell, rowStart = table.rowStart;

  // A group's outcome is the gravest its elements have (for its place when sorted by outcome).
  const GRAVITY = ["failed", "oom", "killed", "cancelled", "running", "waiting", "skipped", "succeeded"];
  const groups = (data.groups || []).map(function (g, index) {
    return { index: index, name: g.name, kind: g.kind, keys: g.keys, position: g.position, elements: [], open: false, sort: -1, sortUp: true,
      counts: {}, attemptCount: 0, runTime: 0, firstStart: null, lastStop: null, duration: null, peak: null, ended: 0, detail: "" };
  });
  tasks.forEach(function (t) {
    const g = groups[t.group];
    if (!g) { t.group = null; return; }
    g.elements.push(t);
    g.counts[t.outcome] = (g.counts[t.outcome] || 0) + 1;
    g.attemptCount += t.attempts.length;
    t.attempts.forEach(function (a) {
      g.runTime += a.stop - a.start;
      if (g.firstStart == null || a.start < g.firstStart) g.firstStart = a.start;
      if (g.lastStop == null || a.stop > g.lastStop) g.lastStop = a.stop;
    });
    if (t.peak != null && (g.peak == null || t.peak > g.peak)) g.peak = t.peak;
    if (t.state !== "running" && t.state !== "waiting") g.ended++;
  });
  groups.forEach(function (g) {
    g.outcome = GRAVITY.find(function (o) { return g.counts[o]; }) || "waiting";
    g.reason = ORDER.filter(function (o) { return g.counts[o]; }).map(function (o) { return g.counts[o] + " " + WORDS[o]; }).join(", ") || "no element in the journal yet";
    g.lastFraction = g.elements.length ? g.ended / g.elements.length : null;
    if (g.firstStart != null) g.duration = g.lastStop - g.firstStart;
    g.search = (g.name + " " + g.outcome).toLowerCase();
  });
  // The table's order: the job file's, a group's row where the job file has it.
  (function () {
    const byPosition = groups.slice().sort(function (a, b) { return a.position - b.position || a.index - b.index; });
    let rank = 0, next = 0;
    tasks.forEach(function (t, i) {
      while (next < byPosition.length && byPosition[next].position <= i) byPosition[next++].rank = rank++;
      if (t.group == null) t.rank = rank++;
    });
    while (next < byPosition.length) byPosition[next++].rank = rank++;
  })();

  // ---- the rows: a group's, the head of its comparison, an element's ----
  function groupRow(g, i) {
    const counts = ORDER.filter(function (o) { return g.counts[o]; }).map(function (o) {
      return '<span class="count" title="' + g.counts[o] + " " + WORDS[o] + '">' + swatch(o) + g.counts[o] + "</span>";
    }).join("");
    const cells = [
      '<div class="name" title="' + esc(g.name) + '"><span class="caret">' + (g.open ? "▾" : "▸") + "</span>" + esc(g.name) + ' <span class="muted">' + (g.kind === "array" ? "array" : "sweep") + "</span></div>",
      "<div>" + (counts || outcomeCell("waiting")) + "</div>",
      '<div title="' + esc(g.reason) + '">' + esc(g.reason) + (g.runTime ? ' <span class="muted">· ' + duration(g.runTime) + " run in all</span>" : "") + "</div>",
      '<div class="num">' + g.attemptCount + "</div>",
      '<div class="num">' + (g.firstStart == null ? "–" : offset(g.firstStart)) + "</div>",
      '<div class="num" title="from its first start to its last end">' + duration(g.duration) + "</div>",
      '<div class="num">–</div>',
      peakCell(g.peak),
      '<div class="muted">' + g.ended + " of " + g.elements.length + " ended</div>",
    ].concat(table.resultColumns.map(function () { return "<div></div>"; }));
    return rowStart(" group" + (g.open ? " open" : ""), i) + ' data-group="' + g.index + '">' + cells.join("") + "</div>";
  }
  function headRow(g, i) {
    return rowStart(" sweep-head", i, g.template) + ">" + g.columns.map(function (c, k) {
      const classes = (c.num ? "num" : "") + (g.sort === k ? " sorted" + (g.sortUp ? " up" : "") : "");
      const best = c.best == null ? "" : ' title="' + (c.lower ? "lowest" : "highest") + ' is best"';
      return '<div data-gcolumn="' + k + '" data-of="' + g.index + '" class="' + classes + '"' + best + ">" + esc(c.label) + (c.best == null ? "" : c.lower ? " ↓" : " ↑") + "</div>";
    }).join("") + "</div>";
  }
  function elementRow(t, i) {
    const g = groups[t.group];
    return rowStart(" element" + (table.isSelected(t) ? " selected" : ""), i, g.template) + ' data-task="' + t.index + '" title="' + esc(t.name) + '">' +
      g.columns.map(function (c) { return c.cell(t); }).join("") + "</div>";
  }

  // A click on a group's row opens or closes it, one on its comparison's head sorts by that
  // column (again: the other way). Says whether the click was one of these, so that page.js
  // lays the table out again, or else looks for a task's row.
  function openOrSort(target) {
    const column = target.closest("[data-gcolumn]");
    if (column) {
      const g = groups[Number(column.dataset.of)], k = Number(column.dataset.gcolumn);
      if (g.sort === k) g.sortUp = !g.sortUp; else { g.sort = k; g.sortUp = true; }
      return true;
    }
    const row = target.closest("[data-group]");
    if (!row) return false;
    const g = groups[Number(row.dataset.group)];
    g.open = !g.open;
    if (g.open && !g.columns) compare(g);
    return true;
  }

  // ---- a sweep's elements compared ----
  // Its columns: one per parameter key (from the elements' names), one per key of their
  // results (the first RESULT_COLUMNS), then outcome, attempts, duration and peak memory.
  // Made when the group is first opened: a closed array of 100,000 costs nothing here.
  const RESULT_COLUMNS = 12;
  // A result whose key says it measures a loss, an error or a cost is best when lowest;
  // any other (accuracy, score, throughput) when highest.
  const LOWER_IS_BETTER = /loss|err|mse|mae|rmse|nll|perplexity|ppl|wer|cer|latency|time|duration|seconds|cost|regret/i;
  function pairValue(pairs, key) {
    if (pairs) for (let i = 0; i < pairs.length; i += 2) if (pairs[i] === key) return pairs[i + 1];
    return undefined;
  }
  function numberText(v) { return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6))); }
  // The result keys `list`'s tasks reported, in the order first reported, each with
  // whether every value given is a number. Past KEY_SCAN keys the rest are passed over:
  // no table has room for them, and each would cost a pass over the tasks.
  const KEY_SCAN = 64;
  function resultKeys(list) {
    const keys = [], byKey = new Map();
    list.forEach(function (t) {
      for (let i = 0; t.fields && i < t.fields.length; i += 2) {
        let k = byKey.get(t.fields[i]);
        if (!k) {
          if (keys.length >= KEY_SCAN) continue;
          k = { key: t.fields[i], given: 0, numbers: 0 };
          byKey.set(k.key, k);
          keys.push(k);
        }
        const v = t.fields[i + 1];
        if (v != null) { k.given++; if (typeof v === "number") k.numbers++; }
      }
    });
    keys.forEach(function (k) { k.num = k.given > 0 && k.numbers === k.given; });
    return keys;
  }
  // The column of result key `k` (from resultKeys) among the tasks of `list`: its value,
  // its cell, and, for numbers, the best (of those that succeeded, or of all where none did).
  function resultColumn(list, k) {
    const key = k.key;
    const col = { label: key, num: k.num, width: "minmax(76px,1fr)",
      value: function (t) { const v = pairValue(t.fields, key); return v == null || col.num ? v : String(v); } };
    if (col.num) {
      col.lower = LOWER_IS_BETTER.test(key);
      const succeeded = list.some(function (t) { return t.outcome === "succeeded" && typeof pairValue(t.fields, key) === "number"; });
      col.counts = function (t) { return !succeeded || t.outcome === "succeeded"; };
      list.forEach(function (t) {
        const v = pairValue(t.fields, key);
        if (typeof v === "number" && col.counts(t) && (col.best == null || (col.lower ? v < col.best : v > col.best))) col.best = v;
      });
    }
    col.cell = function (t) {
      const v = pairValue(t.fields, key);
      if (v === undefined) return col.num ? '<div class="num"></div>' : "<div></div>";
      const best = col.num && v === col.best && col.counts(t);
      const text = typeof v === "number" ? numberText(v) : v === null ? "null" : String(v);
      return '<div class="' + (col.num ? "num" : "") + (best ? " best" : "") + '" title="' + esc(best ? "best: " + v : v) + '">' + esc(text) + "</div>";
    };
    return col;
  }
  // The task table's result columns, of `plain` (the tasks that are no element; a sweep's
  // are compared in its own table): numbers first, at most TASK_RESULT_COLUMNS.
  const TASK_RESULT_COLUMNS = 8;
  function taskResultColumns(plain) {
    const keys = resultKeys(plain);
    return keys.filter(function (k) { return k.num; }).concat(keys.filter(function (k) { return !k.num; }))
      .slice(0, TASK_RESULT_COLUMNS).map(function (k) { return resultColumn(plain, k); });
  }
  function compare(g) {
    const cols = [];
    g.keys.forEach(function (key) {
      const num = g.elements.every(function (t) { const v = pairValue(t.params, key); return v == null || (v.trim() !== "" && isFinite(Number(v))); });
      cols.push({ label: key, num: num, width: "minmax(64px,1fr)",
        value: function (t) { const v = pairValue(t.params, key); return v == null ? null : num ? Number(v) : v; },
        cell: function (t) { const v = pairValue(t.params, key); return '<div class="' + (num ? "num " : "") + 'name">' + (v == null ? "" : esc(v)) + "</div>"; } });
    });
    resultKeys(g.elements).slice(0, RESULT_COLUMNS).forEach(function (k) { cols.push(resultColumn(g.elements, k)); });
    cols.push(
      { label: "Outcome", width: "118px", value: function (t) { return ORDER.indexOf(t.outcome); }, cell: function (t) { return "<div>" + outcomeCell(t.outcome) + stragglerTag(t) + "</div>"; } },
      { label: "Attempts", num: true, width: "70px", value: function (t) { return t.attemptCount; }, cell: function (t) { return '<div class="num">' + t.attemptCount + "</div>"; } },
      { label: "Duration", num: true, width: "86px", value: function (t) { return t.duration; }, cell: function (t) { return '<div class="num">' + duration(t.duration) + "</div>"; } },
      { label: "Peak memory", num: true, width: table.peakWidth, value: function (t) { return t.peak; }, cell: function (t) { return peakCell(t.peak, t); } });
    g.columns = cols;
    g.template = cols.map(function (c) { return c.width; }).join(" ");
  }
  // An opened group's elements that pass the filter (`g.shown`, page.js's to set), in its
  // comparison's order; a missing value sorts last either way.
  function sortedElements(g) {
    if (g.sort < 0) return g.shown;
    const value = g.columns[g.sort].value, sign = g.sortUp ? 1 : -1;
    return g.shown.slice().sort(function (a, b) {
      const x = value(a), y = value(b), xm = x == null || x === "", ym = y == null || y === "";
      if (xm || ym) return xm === ym ? a.index - b.index : xm ? 1 : -1;
      return (x < y ? -sign : x > y ? sign : 0) || a.index - b.index;
    });
  }

  return { groups: groups, groupRow: groupRow, headRow: headRow, elementRow: elementRow, openOrSort: openOrSort, sortedElements: sortedElements,
    taskResultColumns: taskResultColumns };
}
