// Keeps the overview current: polls /api/queues every 2 s, updates the
// counts in place and redraws the throughput charts. A queue that appears
// or goes reloads the page, so that its row and forms come from the server.
"use strict";

const POLL_MS = 2000;

function duration(ms) {
  if (ms === null) return "-";
  let s = Math.floor(ms / 1000);
  const units = [["days", 86400], ["h", 3600], ["m", 60], ["s", 1]];
  const parts = [];
  for (const [unit, size] of units) {
    if (s >= size || (unit === "s" && parts.length === 0)) {
      parts.push(Math.floor(s / size) + unit);
      s %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}

function paused(queue) {
  if (!queue.paused) return "-";
  return queue.paused_until ? "until " + queue.paused_until : "until resumed";
}

// A capped queue's fill, as the page shows it: "5 of 10 pending (50%)".
function fill(pending, cap) {
  return `${pending} of ${cap} pending (${Math.floor((pending * 100) / Math.max(cap, 1))}%)`;
}

function setField(name, field, text) {
  for (const cell of document.querySelectorAll("td[data-field='" + field + "']")) {
    if (cell.dataset.queue !== name) continue;
    const target = cell.querySelector("a") || cell;
    if (target.textContent !== text) target.textContent = text;
  }
}

// Draws `values` across `svg`, whose view box is `width` by `height`.
function drawLine(svg, values, width, height) {
  const top = Math.max(1, ...values);
  // One point is drawn as a level line across the chart.
  const drawn = values.length === 1 ? [values[0], values[0]] : values;
  const step = drawn.length > 1 ? width / (drawn.length - 1) : 0;
  const line = drawn.map((value, i) =>
    (i * step).toFixed(1) + "," + (height - 2 - (value / top) * (height - 4)).toFixed(1));
  svg.querySelector("polyline").setAttribute("points", line.join(" "));
}

function drawChart(series, points) {
  const svg = document.querySelector("svg[data-chart='" + series + "']");
  if (!svg) return;
  const values = points.map((point) => point[series + "_per_s"]);
  drawLine(svg, values, 300, 60);
  const rate = document.querySelector("[data-rate='" + series + "']");
  if (rate) rate.textContent = values.length ? values[values.length - 1].toFixed(1) : "-";
}

async function refresh() {
  try {
    const response = await fetch("/api/queues", { credentials: "same-origin" });
    if (!response.ok) return;
    const data = await response.json();
    const shown = [...document.querySelectorAll("tr[data-queue]")].map((row) => row.dataset.queue);
    const names = data.queues.map((queue) => queue.queue);
    if (shown.join("\n") !== names.join("\n")) {
      location.reload();
      return;
    }
    for (const queue of data.queues) {
      for (const field of ["pending", "leased", "dead", "done", "cancelled"]) {
        setField(queue.queue, field, String(queue[field]));
      }
      setField(queue.queue, "oldest_ready_age", duration(queue.oldest_ready_age_ms));
      setField(queue.queue, "concurrency_limit", queue.concurrency_limit === null ? "-" : String(queue.concurrency_limit));
      setField(queue.queue, "max_pending", queue.max_pending === null ? "-" : fill(queue.pending, queue.max_pending));
      setField(queue.queue, "paused", paused(queue));
    }
    for (const series of ["pushed", "finished", "dead"]) drawChart(series, data.history.points);
    for (const svg of document.querySelectorAll("svg[data-age-chart]")) {
      const name = svg.dataset.ageChart;
      drawLine(svg, data.history.points.map((point) => point.oldest_ready_age_ms[name] || 0), 100, 20);
    }
    document.body.dataset.refreshed = String(Date.now());
  } catch (err) {
    // The server may be restarting: try again at the next tick.
  }
}

refresh();
setInterval(refresh, POLL_MS);
