// Keeps a queue's or a task's page current: every 2 s it reads the same
// page again and puts the fresh copy of each part marked data-live in the
// place of the old one. Forms outside those parts (a search half typed)
// are never touched; inside them, the boxes ticked stay ticked.
"use strict";

const LIVE_POLL_MS = 2000;

// The values of the ticked boxes in `region`, by name.
function ticked(region) {
  return new Set([...region.querySelectorAll("input[type=checkbox]:checked")]
    .map((box) => box.name + "=" + box.value));
}

function tick(region, wanted) {
  for (const box of region.querySelectorAll("input[type=checkbox]")) {
    if (wanted.has(box.name + "=" + box.value)) box.checked = true;
  }
}

async function refreshLive() {
  if (document.hidden) return;
  try {
    const response = await fetch(location.href, { credentials: "same-origin" });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const region of document.querySelectorAll("[data-live]")) {
      const replacement = fresh.getElementById(region.id);
      if (!replacement || replacement.innerHTML === region.innerHTML) continue;
      const keep = ticked(region);
      const adopted = document.importNode(replacement, true);
      tick(adopted, keep);
      region.replaceWith(adopted);
    }
    document.body.dataset.refreshed = String(Date.now());
  } catch (err) {
    // The server may be restarting: try again at the next tick.
  }
}

setInterval(refreshLive, LIVE_POLL_MS);
